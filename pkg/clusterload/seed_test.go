package clusterload

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWaitRunningStall: the wait goes on while pods keep becoming
// Running, longer in all than the stall bound, and gives up once the
// bound passes with none more.
func TestWaitRunningStall(t *testing.T) {
	cs := fake.NewClientset()
	ctx := t.Context()
	pod := func(i int, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns", Labels: map[string]string{"group": "load"}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	for i := range 4 {
		if _, err := cs.CoreV1().Pods("ns").Create(ctx, pod(i, corev1.PodPending), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One more pod Running every 1.5 s, the first three only: 4.5 s of
	// progress in all against a stall bound of 2.5 s.
	go func() {
		for i := range 3 {
			time.Sleep(1500 * time.Millisecond)
			if _, err := cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), pod(i, corev1.PodRunning), metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}()
	start := time.Now()
	running, err := WaitRunning(ctx, cs, 4, 2500*time.Millisecond, nil)
	took := time.Since(start)
	if running != 3 || err == nil || !strings.Contains(err.Error(), "3 of 4 pods Running, none more for 2.5s") {
		t.Fatalf("got %d Running, %v; want 3 and the stall named", running, err)
	}
	if took < 6*time.Second || took > 15*time.Second {
		t.Errorf("gave up after %v, want the 4.5 s of progress and then the 2.5 s stall (and a poll)", took)
	}
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, pod(3, corev1.PodRunning), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if running, err := WaitRunning(ctx, cs, 4, time.Second, nil); running != 4 || err != nil {
		t.Errorf("all Running: got %d, %v; want 4 at once", running, err)
	}
}

func TestRunningPollInterval(t *testing.T) {
	for _, tt := range []struct {
		want int
		poll time.Duration
	}{{10, time.Second}, {3100, 3100 * time.Millisecond}, {11500, 11500 * time.Millisecond}} {
		if got := RunningPollInterval(tt.want); got != tt.poll {
			t.Errorf("RunningPollInterval(%d) = %v, want %v", tt.want, got, tt.poll)
		}
	}
}
