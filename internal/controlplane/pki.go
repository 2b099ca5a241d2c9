package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
)

// Identity is the user a component authenticates as: the common name and
// organizations of its client certificate, which kube-apiserver's x509
// authenticator maps to user and groups
// (k8s.io/apiserver/pkg/authentication/request/x509 CommonNameUserConversion).
type Identity struct {
	// User is the certificate's common name.
	User string
	// Groups are its organizations.
	Groups []string
}

var (
	// ControllerManagerIdentity is the user Kubernetes' bootstrap policy
	// gives kube-controller-manager's roles
	// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy: system:kube-controller-manager).
	ControllerManagerIdentity = Identity{User: "system:kube-controller-manager"}
	// SchedulerIdentity is the user of the bootstrap policy's
	// system:kube-scheduler and system:volume-scheduler bindings.
	SchedulerIdentity = Identity{User: "system:kube-scheduler"}
	// KWOKIdentity is KWOK's: an administrator, as kwokctl's kubeconfig
	// makes it (it writes Node and Pod status and node Leases of every
	// node it manages, which no bootstrap role grants one user).
	KWOKIdentity = Identity{User: "etcdkit-kwok", Groups: []string{"system:masters"}}
)

// writeKubeconfig signs a client certificate for id with the PKI's CA
// (ECDSA P-256, valid as long as the CA) and writes it, its key and a
// kubeconfig naming server, the CA and them into dir/NAME.crt, NAME.key
// and NAME.kubeconfig; it returns the kubeconfig's path.
func writeKubeconfig(dir, name, server string, pki apiserverproc.PKI, id Identity) (string, error) {
	ca, caKey, err := loadCA(pki)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id.User, Organization: id.Groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("client certificate of %s: %w", id.User, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER); err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["etcdkit"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: pki.CA}
	cfg.AuthInfos[id.User] = &clientcmdapi.AuthInfo{ClientCertificate: certPath, ClientKey: keyPath}
	cfg.Contexts["etcdkit"] = &clientcmdapi.Context{Cluster: "etcdkit", AuthInfo: id.User}
	cfg.CurrentContext = "etcdkit"
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// loadCA reads the PKI's CA certificate and key.
func loadCA(pki apiserverproc.PKI) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(pki.CA)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(pki.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s holds no PEM block", pki.CA, pki.CAKey)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pki.CA, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pki.CAKey, err)
	}
	return ca, key, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
