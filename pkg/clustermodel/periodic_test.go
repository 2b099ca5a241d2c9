package clustermodel

import (
	"testing"
	"time"
)

// TestNodeStatusDelay: KWOK's node heartbeat waits 600 s plus up to 10 s
// (the stage's delay 600,000 ms and jitter 610,000 ms).
func TestNodeStatusDelay(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 600 * time.Second}, {0.5, 605 * time.Second}, {0.999999, 610*time.Second - 10*time.Microsecond}} {
		if got := nodeStatusDelay(tc.u); got < tc.want-time.Millisecond || got > tc.want+time.Millisecond {
			t.Errorf("nodeStatusDelay(%v): got %v, want %v", tc.u, got, tc.want)
		}
	}
}
