package machine

import (
	"os"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	mem, ok := MemTotalBytes()
	if !ok || mem <= 0 || mem%1024 != 0 {
		t.Errorf("MemTotalBytes: got %d, %v, want a positive multiple of 1024, true", mem, ok)
	}
	k := Kernel()
	if !strings.HasPrefix(k, "Linux ") || len(k) <= len("Linux ") {
		t.Errorf("Kernel: got %q, want \"Linux <release>\"", k)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil && strings.Contains(string(b), "model name") && CPUModel() == "" {
		t.Errorf("CPUModel: got \"\", want the model name /proc/cpuinfo holds")
	}
}

func TestUtsString(t *testing.T) {
	tests := []struct {
		name string
		in   []int8
		want string
	}{
		{"terminated", []int8{'L', 'i', 'n', 0, 'x'}, "Lin"},
		{"full", []int8{'a', 'b'}, "ab"},
		{"empty", []int8{0}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := utsString(tt.in); got != tt.want {
				t.Errorf("utsString(%v): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
