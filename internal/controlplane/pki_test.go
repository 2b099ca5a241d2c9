package controlplane

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// TestWriteKubeconfig: each component's kubeconfig names the server and
// the CA, and its client certificate is signed by the CA, for client
// authentication, with the identity's user as common name and its groups
// as organizations (what kube-apiserver's x509 authenticator reads).
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	files, err := etcdproc.GenerateTLS(dir, "unused")
	if err != nil {
		t.Fatal(err)
	}
	pki := apiserverproc.PKI{CA: files.CA, CAKey: files.CAKey}
	for _, tt := range []struct {
		name string
		id   Identity
	}{
		{"kube-controller-manager", ControllerManagerIdentity},
		{"kube-scheduler", SchedulerIdentity},
		{"kwok", KWOKIdentity},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const server = "https://127.0.0.1:6443"
			path, err := writeKubeconfig(dir, tt.name, server, pki, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatalf("load %s: %v", path, err)
			}
			if rc.Host != server || rc.CAFile != pki.CA {
				t.Errorf("got server %q CA %q, want %q %q", rc.Host, rc.CAFile, server, pki.CA)
			}
			certPEM, err := os.ReadFile(rc.CertFile)
			if err != nil {
				t.Fatalf("client certificate %q: %v", rc.CertFile, err)
			}
			if rc.KeyFile != filepath.Join(dir, tt.name+".key") {
				t.Errorf("got key file %q, want %q", rc.KeyFile, filepath.Join(dir, tt.name+".key"))
			}
			b, _ := pem.Decode(certPEM)
			if b == nil {
				t.Fatalf("%s holds no PEM block", rc.CertFile)
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != tt.id.User || !slices.Equal(cert.Subject.Organization, tt.id.Groups) {
				t.Errorf("got subject CN %q O %q, want %q %q", cert.Subject.CommonName, cert.Subject.Organization, tt.id.User, tt.id.Groups)
			}
			caPEM, err := os.ReadFile(pki.CA)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(caPEM)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("client certificate does not verify against the CA for client auth: %v", err)
			}
		})
	}
}
