package kubeload

import (
	"fmt"
	"strings"
	"testing"
)

func TestPodsCreatedText(t *testing.T) {
	for _, c := range []struct {
		p      podsCreated
		behind bool
	}{
		{podsCreated{model: 600, real: 599}, false}, // one pod at the window's edge
		{podsCreated{model: 600, real: 601}, false}, // the real side ahead
		{podsCreated{model: 600, real: 589}, false}, // 11 of 600: under 2 %
		{podsCreated{model: 600, real: 587}, true},  // 13 of 600
		{podsCreated{model: 50, real: 49}, false},   // 2 % but a single pod
		{podsCreated{model: 50, real: 48}, true},
	} {
		got := c.p.text()
		if strings.Contains(got, "fell behind") != c.behind {
			t.Errorf("%+v: %q; fell behind: want %v", c.p, got, c.behind)
		}
		if want := fmt.Sprintf("created %d pods in the window, the model %d", c.p.real, c.p.model); !strings.Contains(got, want) {
			t.Errorf("%+v: %q lacks %q", c.p, got, want)
		}
	}
}
