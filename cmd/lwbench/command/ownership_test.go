package command

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestPutListWatchOwnership runs put, list and watch on a member lwbench
// starts and on one it is only pointed at (--endpoints). The result must
// say which (target.managed: it said false for both), and on the member
// lwbench does not own nothing of its own may stay behind: no key under
// its prefix and no lease (put left the events' leases before).
func TestPutListWatchOwnership(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	commands := [][]string{
		{"put", "--writes", "200", "--write-rate", "2000", "--keys", "50"},
		{"list", "--objects", "20", "--page-sizes", "10", "--repeats", "1"},
		{"watch", "--watchers", "4", "--streams", "2", "--writes", "20", "--write-rate", "500", "--keys", "5"},
	}
	for _, args := range commands {
		for _, external := range []bool{false, true} {
			name := args[0] + " embedded"
			full := append(append([]string(nil), args...), "-w", "json")
			if external {
				name = args[0] + " --endpoints"
				full = append(full, "--endpoints", srv.Endpoints[0])
			} else {
				full = append(full, "--unsafe-no-fsync")
			}
			t.Run(name, func(t *testing.T) {
				var out, errOut bytes.Buffer
				root := NewRootCommand()
				root.SetOut(&out)
				root.SetErr(&errOut)
				if code := cli.Run(root, full, &errOut); code != 0 {
					t.Fatalf("lwbench %v: exit %d: %s", full, code, errOut.String())
				}
				var res struct {
					Target struct {
						Managed bool `json:"managed"`
					} `json:"target"`
				}
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					t.Fatalf("lwbench %v: %v", full, err)
				}
				if res.Target.Managed == external {
					t.Errorf("lwbench %v: got target.managed %v, want %v", full, res.Target.Managed, !external)
				}
				if !external {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				keys, err := c.Get(ctx, "/lwbench", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				leases, err := c.Leases(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if keys.Count != 0 || len(leases.Leases) != 0 {
					t.Errorf("lwbench %v left %d keys under /lwbench and %d leases, want none", full, keys.Count, len(leases.Leases))
				}
			})
		}
	}
}
