package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	tests := []struct {
		done, total int64
		want        string
	}{
		{0, 10, "x [>         ]   0%"},
		{5, 10, "x [=====>    ]  50%"},
		{10, 10, "x [==========] 100%"},
		{12, 10, "x [==========] 100%"},
	}
	for _, tt := range tests {
		if got := Line("x", tt.done, tt.total, 10); got != tt.want {
			t.Errorf("Line(%d/%d) = %q, want %q", tt.done, tt.total, got, tt.want)
		}
	}
}

func TestBarDrawsAndErases(t *testing.T) {
	var buf bytes.Buffer
	b := Start(&buf, "scan", func() (int64, int64) { return 1, 2 })
	time.Sleep(250 * time.Millisecond)
	b.Stop()
	out := buf.String()
	if !strings.Contains(out, "scan [") || !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("bar output %q: want a drawn bar, then erased", out)
	}
	if IsTerminal(&buf) {
		t.Error("a buffer is not a terminal")
	}
}

func TestHeapSampler(t *testing.T) {
	h := SampleHeap()
	keep := make([]byte, 8<<20)
	time.Sleep(5 * time.Millisecond)
	m := h.Stop()
	if m.PeakHeapBytes < uint64(len(keep)) || m.TotalAllocBytes < m.PeakHeapBytes/2 {
		t.Errorf("mem stats %+v: want a peak of at least %d bytes", m, len(keep))
	}
	keep[0] = 1
}
