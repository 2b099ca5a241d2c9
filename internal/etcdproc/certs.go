package etcdproc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TLSFiles are the PEM files of a test PKI: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate.
type TLSFiles struct {
	// CA is the CA certificate's path (etcd's --trusted-ca-file and
	// etcdctl's --cacert).
	CA string
	// CAKey is the CA's private key, with which Start certifies each
	// member's network-namespace address (Config.Netns); empty when the
	// files did not come from GenerateTLS.
	CAKey string `json:",omitempty"`
	// ServerCert and ServerKey are the members' certificate and key
	// (etcd's --cert-file, --key-file; also used between peers).
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's certificate and key
	// (etcdctl's --cert and --key).
	ClientCert, ClientKey string
	// ClientCertAuth makes the server require client certificates
	// (etcd's --client-cert-auth).
	ClientCertAuth bool
}

// ClientTLS returns the client side TLS configuration for these files,
// built by etcd's own transport package as etcdctl builds it.
func (f TLSFiles) ClientTLS() (*tls.Config, error) {
	info := transport.TLSInfo{CertFile: f.ClientCert, KeyFile: f.ClientKey, TrustedCAFile: f.CA}
	return info.ClientConfig()
}

// GenerateTLS writes a fresh CA (certificate and key), server and client
// key pair under dir and returns their paths. The certificates are ECDSA P-256, valid for a day;
// the client certificate's common name is clientCN (etcd maps it to a user
// when auth is enabled and no password is given).
func GenerateTLS(dir, clientCN string) (TLSFiles, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcdkit test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return TLSFiles{}, err
	}
	files := TLSFiles{
		CA: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
	}
	if err := writePEM(files.CA, "CERTIFICATE", caDER); err != nil {
		return TLSFiles{}, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return TLSFiles{}, err
	}
	if err := writePEM(files.CAKey, "EC PRIVATE KEY", caKeyDER); err != nil {
		return TLSFiles{}, err
	}
	iss := issuer{ca: ca, key: caKey}
	if err := iss.leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, nil, files.ServerCert, files.ServerKey); err != nil {
		return TLSFiles{}, fmt.Errorf("server certificate: %w", err)
	}
	if err := iss.leaf(3, clientCN, x509.ExtKeyUsageClientAuth, nil, files.ClientCert, files.ClientKey); err != nil {
		return TLSFiles{}, fmt.Errorf("client certificate: %w", err)
	}
	return files, nil
}

// issuer signs leaf certificates with a CA.
type issuer struct {
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
}

// loadIssuer reads the CA certificate and key of files.
func loadIssuer(files TLSFiles) (issuer, error) {
	if files.CAKey == "" {
		return issuer{}, errors.New("no CA key to certify the members' addresses with (TLSFiles.CAKey; GenerateTLS writes one)")
	}
	certPEM, err := os.ReadFile(files.CA)
	if err != nil {
		return issuer{}, err
	}
	keyPEM, err := os.ReadFile(files.CAKey)
	if err != nil {
		return issuer{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return issuer{}, fmt.Errorf("%s or %s holds no PEM block", files.CA, files.CAKey)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return issuer{}, fmt.Errorf("%s: %w", files.CA, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return issuer{}, fmt.Errorf("%s: %w", files.CAKey, err)
	}
	return issuer{ca: ca, key: key}, nil
}

// leaf writes a fresh ECDSA P-256 key pair, valid for a day, to certPath
// and keyPath. A server certificate is also good for client
// authentication (etcd dials itself, for the gRPC gateway, with its
// pair) and certifies 127.0.0.1, localhost and ips.
func (iss issuer) leaf(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, certPath, keyPath string) error {
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		tmpl.IPAddresses = append([]net.IP{net.ParseIP("127.0.0.1")}, ips...)
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, iss.ca, &key.PublicKey, iss.key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
