package revision

import (
	"errors"
	"testing"
)

func TestParseResourceVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "123456789", want: 123456789},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", wantErr: true},
		{in: "-1", wantErr: true},
		{in: " 5", wantErr: true},
		{in: "5a", wantErr: true},
		{in: "0x10", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseResourceVersion(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidResourceVersion) {
					t.Fatalf("ParseResourceVersion(%q) error = %v, want ErrInvalidResourceVersion", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseResourceVersion(%q) = %d, %v; want %d, nil", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestResourceVersionFromRevisions(t *testing.T) {
	if got := ObjectResourceVersion(42); got != "42" {
		t.Errorf("ObjectResourceVersion(42) = %q, want \"42\"", got)
	}
	if got := ObjectResourceVersion(0); got != "" {
		t.Errorf("ObjectResourceVersion(0) = %q, want \"\"", got)
	}
	if got := ListResourceVersion(1001); got != "1001" {
		t.Errorf("ListResourceVersion(1001) = %q, want \"1001\"", got)
	}
	for _, rv := range []int64{1, 2, 77, 1 << 40} {
		back, err := ParseResourceVersion(ObjectResourceVersion(rv))
		if err != nil || back != rv {
			t.Errorf("round trip of %d = %d, %v", rv, back, err)
		}
	}
}

func TestCompacted(t *testing.T) {
	tests := []struct {
		rev, compact int64
		want         bool
	}{
		{rev: 14, compact: 15, want: true},
		{rev: 15, compact: 15, want: false}, // reading at the compact revision works
		{rev: 16, compact: 15, want: false},
		{rev: 0, compact: 15, want: false}, // 0 means latest
		{rev: 5, compact: 0, want: false},
	}
	for _, tt := range tests {
		if got := Compacted(tt.rev, tt.compact); got != tt.want {
			t.Errorf("Compacted(%d, %d) = %v, want %v", tt.rev, tt.compact, got, tt.want)
		}
	}
}
