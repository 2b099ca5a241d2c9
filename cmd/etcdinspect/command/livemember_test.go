package command_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// memberJSON is the member usage and keys --endpoints name in JSON.
type memberJSON struct {
	Member struct {
		Name     string `json:"name"`
		MemberID string `json:"memberID"`
		Endpoint string `json:"endpoint"`
		IsLeader bool   `json:"isLeader"`
	} `json:"member"`
	Total json.RawMessage `json:"total"`
}

// TestLiveMember: on a 3-member cluster of etcd 3.7, usage and keys
// --endpoints read a follower by default, and the member --member names
// (by name, member ID or client URL) otherwise: the member ID in the
// result is the one in the headers of the Ranges' answers, so it names
// the member that served them. Every member gives the same figures. An
// unknown member is a usage error naming --member and the members.
func TestLiveMember(t *testing.T) {
	cl, _ := startKubernetesCluster(t, etcdtest.EtcdBinaries(t, "3.7.3"), 3)
	ep := strings.Join(cl.Endpoints(), ",")

	var st struct {
		Members []struct {
			Name     string `json:"name"`
			MemberID string `json:"memberID"`
			Endpoint string `json:"endpoint"`
			IsLeader bool   `json:"isLeader"`
		} `json:"members"`
	}
	runJSON(t, &st, "status", "--endpoints", ep)
	if len(st.Members) != 3 {
		t.Fatalf("got %d members, want 3", len(st.Members))
	}
	leader, follower := st.Members[0], st.Members[0]
	for _, m := range st.Members {
		if m.IsLeader {
			leader = m
		} else {
			follower = m
		}
	}

	var want string
	tests := []struct {
		name       string
		args       []string
		wantLeader bool
		wantID     string
	}{
		{"usage default", []string{"usage", "--values"}, false, ""},
		{"keys default", []string{"keys", "--values"}, false, ""},
		{"usage by name", []string{"usage", "--values", "--member", leader.Name}, true, leader.MemberID},
		{"usage by ID", []string{"usage", "--values", "--member", leader.MemberID}, true, leader.MemberID},
		{"usage by URL", []string{"usage", "--values", "--member", follower.Endpoint}, false, follower.MemberID},
		{"keys by name", []string{"keys", "--member", leader.Name}, true, leader.MemberID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got memberJSON
			args := append(tc.args, "--endpoints", ep, "-w", "json")
			out, stderr, code := run(t, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing on stderr (not a terminal: no progress bar)", code, stderr)
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			m := got.Member
			if m.IsLeader != tc.wantLeader || (tc.wantID != "" && m.MemberID != tc.wantID) || m.Name == "" || m.Endpoint == "" {
				t.Errorf("got member %+v, want leader %v, ID %q", m, tc.wantLeader, tc.wantID)
			}
			served := false
			for _, s := range st.Members {
				served = served || (s.MemberID == m.MemberID && s.Name == m.Name && s.IsLeader == m.IsLeader)
			}
			if !served {
				t.Errorf("member %+v: want the ID of the member named, from the Ranges' headers, among %+v", m, st.Members)
			}
			if tc.args[0] == "usage" {
				if want == "" {
					want = string(got.Total)
				}
				if string(got.Total) != want {
					t.Errorf("total read from %s: got %s, want %s as from the other members", m.Name, got.Total, want)
				}
			}
		})
	}

	t.Run("table", func(t *testing.T) {
		out, _, code := run(t, "usage", "--endpoints", ep, "--member", follower.Name)
		if w := fmt.Sprintf("Read from member %s (%s, a follower", follower.Name, follower.Endpoint); code != 0 || !strings.Contains(out, w) {
			t.Errorf("got exit %d, output:\n%s\nwant %q", code, out, w)
		}
	})

	t.Run("unknown member", func(t *testing.T) {
		out, stderr, code := run(t, "usage", "--endpoints", ep, "--member", "nope")
		if code != 2 || out != "" || !strings.Contains(stderr, "--member \"nope\": no such member") || !strings.Contains(stderr, leader.Name) ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("got exit %d, stdout %q, stderr %q; want 2 and one line naming --member and the members", code, out, stderr)
		}
	})
}
