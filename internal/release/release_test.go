package release

import (
	"errors"
	"strings"
	"testing"
)

// TestResolve: the accepted forms resolve to the release they name, and
// every other value is refused as invalid (its form) or unknown (a release
// the table does not list), on one line.
func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		product Product
		in      string
		want    string
		wantErr error
	}{
		{"kubernetes minor", Kubernetes, "1.37", "1.37.2", nil},
		{"kubernetes patch", Kubernetes, "1.36.1", "1.36.1", nil},
		{"kubernetes oldest patch", Kubernetes, "1.35.0", "1.35.0", nil},
		{"kubernetes v prefix", Kubernetes, "v1.37.2", "1.37.2", nil},
		{"kubernetes pre-release", Kubernetes, "1.38.0-beta.0", "1.38.0-beta.0", nil},
		{"kubernetes pre-release v prefix", Kubernetes, "v1.38.0-beta.0", "1.38.0-beta.0", nil},
		{"kubernetes minor with only a pre-release", Kubernetes, "1.38", "1.38.0-beta.0", nil},
		{"etcd minor", Etcd, "3.6", "3.6.16", nil},
		{"kwok pinned", KWOK, "v0.8.0", "0.8.0", nil},
		{"kwok minor", KWOK, "0.8", "0.8.0", nil},
		{"kwok unknown patch", KWOK, "0.8.1", "", ErrUnknown},
		{"kwok path", KWOK, "0.8.0/kwok", "", ErrInvalid},
		{"etcd patch", Etcd, "3.7.3", "3.7.3", nil},
		{"etcd debian", Etcd, "3.4.23", "3.4.23", nil},

		{"path separator", Kubernetes, "1.37.2/kube-apiserver", "", ErrInvalid},
		{"parent directory", Kubernetes, "1.37.2/../../x", "", ErrInvalid},
		{"trailing dot", Kubernetes, "1.37.", "", ErrInvalid},
		{"negative patch", Kubernetes, "1.37.-1", "", ErrInvalid},
		{"leading zero", Kubernetes, "1.037", "", ErrInvalid},
		{"four parts", Kubernetes, "1.37.2.1", "", ErrInvalid},
		{"major alone", Kubernetes, "1", "", ErrInvalid},
		{"empty", Kubernetes, "", "", ErrInvalid},
		{"v alone", Kubernetes, "v", "", ErrInvalid},
		{"two v", Kubernetes, "vv1.37.2", "", ErrInvalid},
		{"space", Kubernetes, " 1.37.2", "", ErrInvalid},
		{"shell", Kubernetes, "1.37.2;rm -rf ~", "", ErrInvalid},
		{"command substitution", Kubernetes, "$(touch x)", "", ErrInvalid},
		{"newline", Kubernetes, "1.37.2\n", "", ErrInvalid},
		{"nul", Kubernetes, "1.37.2\x00", "", ErrInvalid},
		{"not utf-8", Kubernetes, "1.37.\xff", "", ErrInvalid},
		{"fullwidth digit", Kubernetes, "1.37.２", "", ErrInvalid},
		{"other pre-release", Kubernetes, "1.38.0-beta.1", "", ErrInvalid},
		{"pre-release of a known line", Kubernetes, "1.37.0-rc.0", "", ErrInvalid},
		{"pre-release with suffix", Kubernetes, "1.38.0-beta.0/x", "", ErrInvalid},
		{"long", Kubernetes, strings.Repeat("1", 5000), "", ErrInvalid},
		{"huge number", Kubernetes, "1.37.99999999999999999999", "", ErrInvalid},
		{"patch not served", Kubernetes, "1.37.999", "", ErrUnknown},
		{"next patch", Kubernetes, "1.37.3", "", ErrUnknown},
		{"patch of a pre-release line", Kubernetes, "1.38.0", "", ErrUnknown},
		{"old minor", Kubernetes, "1.34", "", ErrUnknown},
		{"new minor", Kubernetes, "1.39.0", "", ErrUnknown},
		{"etcd as kubernetes", Kubernetes, "3.7.3", "", ErrUnknown},
		{"kubernetes as etcd", Etcd, "1.37.2", "", ErrUnknown},
		{"etcd 3.4 not debian's", Etcd, "3.4.22", "", ErrUnknown},
		{"etcd patch not served", Etcd, "3.7.4", "", ErrUnknown},
		{"etcd pre-release", Etcd, "3.8.0-alpha.0", "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.product.Resolve(tt.in)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Resolve(%q): got error %v, want %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Resolve(%q): got %q, want %q", tt.in, got, tt.want)
			}
			if err != nil {
				if msg := err.Error(); strings.ContainsAny(msg, "\n\r\x00") || len(msg) > 300 {
					t.Errorf("Resolve(%q): got error %q, want one line of at most 300 bytes", tt.in, msg)
				}
				if !strings.Contains(err.Error(), tt.product.Name) {
					t.Errorf("Resolve(%q): got error %q, want it to name %s", tt.in, err, tt.product.Name)
				}
			}
		})
	}
}

// TestDefaultsResolve: each line's Default is a release of the line that
// Resolve accepts, so that MAJOR.MINOR and MAJOR.MINOR.PATCH agree.
func TestDefaultsResolve(t *testing.T) {
	for _, p := range []Product{Kubernetes, Etcd} {
		for _, l := range p.Lines {
			got, err := p.Resolve(l.Default)
			if err != nil || got != l.Default {
				t.Errorf("%s %s: Resolve(Default %q) = %q, %v; want %q, nil", p.Name, l.Minor, l.Default, got, err, l.Default)
			}
			if !strings.HasPrefix(l.Default, l.Minor+".") {
				t.Errorf("%s %s: Default %q is not of the line", p.Name, l.Minor, l.Default)
			}
		}
	}
}

// FuzzResolve: no value panics, and a value Resolve accepts becomes a
// release of at most MaxLength bytes made of digits, dots and the letters
// of a listed pre-release: nothing a path or a shell could read otherwise.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"1.37", "1.37.2", "v1.38.0-beta.0", "1.37.2/kube-apiserver", "3.6.16", "1.37.\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []Product{Kubernetes, Etcd} {
			got, err := p.Resolve(s)
			if err != nil {
				continue
			}
			if len(got) > MaxLength || strings.Trim(got, "0123456789.-abet") != "" {
				t.Errorf("%s: Resolve(%q) = %q", p.Name, s, got)
			}
		}
	})
}
