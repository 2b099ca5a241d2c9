package etcdproc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

// GenerateTLS writes a fresh CA, server and client key pair under dir and
// returns their paths. The certificates are ECDSA P-256, valid for a day;
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
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
	}
	if err := writePEM(files.CA, "CERTIFICATE", caDER); err != nil {
		return TLSFiles{}, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) error {
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
			// etcd also dials itself (the gRPC gateway) with this pair.
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
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
	if err := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, files.ServerCert, files.ServerKey); err != nil {
		return TLSFiles{}, fmt.Errorf("server certificate: %w", err)
	}
	if err := leaf(3, clientCN, x509.ExtKeyUsageClientAuth, files.ClientCert, files.ClientKey); err != nil {
		return TLSFiles{}, fmt.Errorf("client certificate: %w", err)
	}
	return files, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
