package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestCPUSeconds: the CPU time read from /proc/<pid>/stat grows while the
// process works (on a shared machine, within 10 s of spinning).
func TestCPUSeconds(t *testing.T) {
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 10*time.Second; {
		now, err := cpuSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 0.1 {
			return
		}
		if now < before {
			t.Fatalf("got %.2f CPU seconds after %.2f: want it to grow", now, before)
		}
	}
	t.Errorf("the CPU seconds read did not grow by 0.1 in 10 s of spinning")
}

// TestReportVerdict: the verdict compares the default scrape's added p99
// at the largest key count with the budget, says when the loads alone
// were too noisy to tell, and a quick run says so in its title.
func TestReportVerdict(t *testing.T) {
	tests := []struct {
		name      string
		quick     bool
		row       row
		want      []string
		wantNever []string
	}{
		{"within", false, row{p99Alone: 10, p99During: 40, aloneMin: 10, aloneMax: 20}, []string{"| +30.0 | yes |"}, []string{"QUICK", "indicative"}},
		{"over", false, row{p99Alone: 10, p99During: 70, aloneMin: 10, aloneMax: 20}, []string{"| +60.0 | NO |"}, nil},
		{"noisy", false, row{p99Alone: 10, p99During: 20, aloneMin: 10, aloneMax: 90}, []string{"yes (inconclusive"}, nil},
		{"quick", true, row{p99Alone: 10, p99During: 20, aloneMin: 10, aloneMax: 20}, []string{"QUICK RUN", "--quick"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := options{releases: releases{{"3.7.3", "/bin"}}, keys: []int{100_000}, quick: tc.quick, rate: 200, duration: time.Second}
			r := tc.row
			r.version, r.mode, r.keys = "3.7.3", "usage keys-only", 100_000
			got := report(o, []row{r}, time.Now(), "0.1", map[string]string{"3.7.3": "3.7.3"})
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got no %q in:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNever {
				if strings.Contains(got, w) {
					t.Errorf("got %q in:\n%s", w, got)
				}
			}
		})
	}
}
