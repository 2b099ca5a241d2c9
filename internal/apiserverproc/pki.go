package apiserverproc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// AdminUser and AdminGroup are the user and group of the admin token Start
// writes into the token file. Members of system:masters are allowed
// everything whatever --authorization-mode says (kube-apiserver puts a
// privileged-group authorizer first: pkg/kubeapiserver/authorizer/reload.go).
const (
	AdminUser  = "etcdkit-admin"
	AdminGroup = "system:masters"
)

// PKI are the files Start generates in Config.Dir/pki and every server of
// a Cluster shares.
type PKI struct {
	// CA certifies ServingCert; clients trust it (rest.Config's CAFile),
	// and kube-apiserver authenticates client certificates it signed
	// (--client-ca-file).
	CA string
	// CAKey is the CA's private key (EC PEM), with which
	// internal/controlplane signs its components' client certificates and
	// kube-controller-manager signs CertificateSigningRequests.
	CAKey string
	// ServingCert and ServingKey are kube-apiserver's --tls-cert-file and
	// --tls-private-key-file, for 127.0.0.1 and localhost.
	ServingCert, ServingKey string
	// ServiceAccountKey and ServiceAccountPublicKey are the ECDSA P-256
	// key pair that signs and verifies service-account tokens
	// (--service-account-signing-key-file, --service-account-key-file).
	ServiceAccountKey, ServiceAccountPublicKey string
	// TokenFile is the --token-auth-file: one line giving Token to
	// AdminUser in AdminGroup.
	TokenFile string
	// Token is the admin bearer token.
	Token string
}

// generatePKI writes a fresh PKI under dir, which must exist.
func generatePKI(dir string) (PKI, error) {
	tls, err := etcdproc.GenerateTLS(dir, AdminUser)
	if err != nil {
		return PKI{}, fmt.Errorf("serving certificate: %w", err)
	}
	p := PKI{
		CA:                      tls.CA,
		CAKey:                   tls.CAKey,
		ServingCert:             tls.ServerCert,
		ServingKey:              tls.ServerKey,
		ServiceAccountKey:       filepath.Join(dir, "sa.key"),
		ServiceAccountPublicKey: filepath.Join(dir, "sa.pub"),
		TokenFile:               filepath.Join(dir, "tokens.csv"),
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PKI{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return PKI{}, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return PKI{}, err
	}
	if err := writePEM(p.ServiceAccountKey, "EC PRIVATE KEY", keyDER); err != nil {
		return PKI{}, err
	}
	if err := writePEM(p.ServiceAccountPublicKey, "PUBLIC KEY", pubDER); err != nil {
		return PKI{}, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return PKI{}, err
	}
	p.Token = hex.EncodeToString(secret)
	// token,user,uid,"group1,group2" (apiserver's
	// pkg/authentication/token/tokenfile).
	line := fmt.Sprintf("%s,%s,%s,%q\n", p.Token, AdminUser, AdminUser, AdminGroup)
	if err := os.WriteFile(p.TokenFile, []byte(line), 0o600); err != nil {
		return PKI{}, err
	}
	return p, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
