package command

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDeadEndpoints drives every command that takes --endpoints at a closed
// port and at an HTTP server that is not etcd. Each must give up within the
// dial timeout with exit code 1 and one line naming the cause; before,
// put, list, watch and relist-storm printed nothing for minutes and run
// said "status of URL: context deadline exceeded" after 10 s.
func TestDeadEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers on loopback; skipped under -short")
	}
	// The server that is not etcd first: a port freed just before could be
	// handed to it, and the "closed" endpoint would then answer 404.
	notEtcd := httptest.NewServer(http.NotFoundHandler())
	defer notEtcd.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	commands := [][]string{
		{"run"}, {"put"}, {"list"}, {"watch"},
		{"relist-storm", "--quick", "--allow-maintenance"}, {"continuation", "--quick", "--allow-maintenance"}, {"catchup", "--quick", "--allow-maintenance"},
	}
	endpoints := []struct{ url, wantCause string }{
		{closed, "connection refused"},
		{notEtcd.URL, "not an etcd server"},
	}
	for _, cmd := range commands {
		for _, ep := range endpoints {
			t.Run(cmd[0]+" "+ep.wantCause, func(t *testing.T) {
				args := append(append([]string(nil), cmd...), "--endpoints", ep.url, "--dial-timeout", "1s")
				start := time.Now()
				code, _, stderr := runLwbench(t, args...)
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("lwbench %v took %v, want about the 1s dial timeout", args, d)
				}
				if code != 1 {
					t.Errorf("lwbench %v: got exit code %d, want 1; stderr %q", args, code, stderr)
				}
				last := strings.TrimSpace(stderr)
				if i := strings.LastIndex(last, "\n"); i >= 0 {
					last = last[i+1:]
				}
				if !strings.Contains(last, ep.wantCause) || !strings.Contains(last, "--endpoints") {
					t.Errorf("lwbench %v: got last stderr line %q, want it to name --endpoints and %q", args, last, ep.wantCause)
				}
			})
		}
	}
}
