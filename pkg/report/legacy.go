package report

import "encoding/json"

// lastKubeRunSchemaVersion is the last schema version of KubeRunResult,
// the result of a run through kube-apiserver before RunSchemaVersion 4
// made it a RunResult: Decode reads it (and older) into a RunResult.
const lastKubeRunSchemaVersion = 3

// The decoders below read the fields that RunSchemaVersion 4 and
// WatchSchemaVersion 2 renamed under their old names too, so that a
// result written one version back (a RunResult, a KubeRunResult or a
// WatchResult) decodes into today's types: `lwbench report` compares old
// runs with new ones. Encoding writes only the new names.

// UnmarshalJSON reads a RunResult of any version: version 3's watchers
// as Informers, a KubeRunResult's namespaceCleanup as Cleanup.
func (r *RunResult) UnmarshalJSON(b []byte) error {
	type plain RunResult
	var old struct {
		*plain
		Watchers         []InformerStats `json:"watchers"`
		NamespaceCleanup *struct {
			Namespaces     []string `json:"namespaces"`
			ObjectsDeleted int      `json:"objectsDeleted"`
			Left           []string `json:"left"`
			DurationMs     float64  `json:"durationMs"`
			Error          string   `json:"error"`
		} `json:"namespaceCleanup"`
	}
	old.plain = (*plain)(r)
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if r.Informers == nil {
		r.Informers = old.Watchers
	}
	if c := old.NamespaceCleanup; c != nil && r.Cleanup == nil {
		r.Cleanup = &Cleanup{Namespaces: c.Namespaces, ObjectsDeleted: c.ObjectsDeleted, NamespacesLeft: c.Left,
			DurationMs: c.DurationMs, Error: c.Error}
		if r.Cleanup.Namespaces == nil {
			r.Cleanup.Namespaces = []string{}
		}
	}
	if r.Kind == KindKubeRun {
		// A run through kube-apiserver whose informers counted their
		// relists, not their lists.
		for i := range r.Informers {
			r.Informers[i].Lists++
		}
	}
	return nil
}

// UnmarshalJSON reads an InformerStats of any version: a KubeRunResult's
// informers' cachedObjects as CacheObjects and relists as Lists (the
// caller adds the first list: RunResult.UnmarshalJSON).
func (s *InformerStats) UnmarshalJSON(b []byte) error {
	type plain InformerStats
	var old struct {
		*plain
		CachedObjects *int `json:"cachedObjects"`
		Relists       *int `json:"relists"`
	}
	old.plain = (*plain)(s)
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.CachedObjects != nil {
		s.CacheObjects = *old.CachedObjects
	}
	if old.Relists != nil {
		s.Lists = *old.Relists
	}
	return nil
}

// UnmarshalJSON reads a Relist of any version: version 3's watcher as
// Informer; a KubeRunResult's relists' cause as Reason ("none" for "")
// and requests as Pages.
func (r *Relist) UnmarshalJSON(b []byte) error {
	type plain Relist
	var old struct {
		*plain
		Watcher  *int    `json:"watcher"`
		Cause    *string `json:"cause"`
		Requests *int    `json:"requests"`
	}
	old.plain = (*plain)(r)
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.Watcher != nil {
		r.Informer = *old.Watcher
	}
	if old.Cause != nil {
		r.Reason = *old.Cause
		if r.Reason == "" {
			r.Reason = ReasonNone
		}
	}
	if old.Requests != nil {
		r.Pages = *old.Requests
	}
	return nil
}

// UnmarshalJSON reads DeliveryStats of any version: fromCommit (before
// RunSchemaVersion 4 and WatchSchemaVersion 2) as FromResponse.
func (d *DeliveryStats) UnmarshalJSON(b []byte) error {
	type plain DeliveryStats
	return decodeFromCommit(b, (*plain)(d), &d.FromResponse)
}

// UnmarshalJSON reads HeldBackDelivery of any version, as DeliveryStats.
func (d *HeldBackDelivery) UnmarshalJSON(b []byte) error {
	type plain HeldBackDelivery
	return decodeFromCommit(b, (*plain)(d), &d.FromResponse)
}

// UnmarshalJSON reads MemberDelivery of any version, as DeliveryStats.
func (d *MemberDelivery) UnmarshalJSON(b []byte) error {
	type plain MemberDelivery
	return decodeFromCommit(b, (*plain)(d), &d.FromResponse)
}

// decodeFromCommit decodes b into v (a type without UnmarshalJSON of its
// own) and, when b has the field fromCommit (renamed fromResponse), sets
// *fromResponse to it.
func decodeFromCommit(b []byte, v any, fromResponse *Latency) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	var old struct {
		FromCommit *Latency `json:"fromCommit"`
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.FromCommit != nil {
		*fromResponse = *old.FromCommit
	}
	return nil
}
