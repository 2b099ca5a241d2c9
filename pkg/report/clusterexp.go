package report

// ComponentRestart is a control-plane component stopped (SIGTERM, as a
// rollout does) and started again during a cluster run.
type ComponentRestart struct {
	// Component is kube-apiserver, kube-controller-manager,
	// kube-scheduler or kwok.
	Component string `json:"component"`
	// AtMs is when the restart began, after the run began; DownMs how
	// long from the signal until it was ready again (kube-apiserver's
	// /readyz, kwok's /healthz, the others holding their leader Lease).
	AtMs   float64 `json:"atMs"`
	DownMs float64 `json:"downMs"`
	// Error says why it did not come back; "" if it did.
	Error string `json:"error,omitempty"`
}

// NodeHealth is what a cluster's nodes showed during the churn: the
// renewals of their Leases in kube-node-lease as etcd committed them (a
// watch of the prefix on etcd, so the intervals include any stall of
// etcd's), and their Ready conditions as kube-controller-manager's node
// lifecycle controller set them (an informer on nodes through
// kube-apiserver).
type NodeHealth struct {
	// Nodes is how many nodes' Leases were renewed at least twice;
	// Renewals counts every renewal seen (a Lease's create is none).
	Nodes    int   `json:"nodes"`
	Renewals int64 `json:"renewals"`
	// IntervalP50Ms, IntervalP99Ms and IntervalMaxMs are the intervals
	// between two renewals of one node's Lease (nearest rank, all
	// nodes); a kubelet's (and KWOK's) is 10-10.4 s
	// (controlplane.NodeLeaseRenewInterval).
	IntervalP50Ms float64 `json:"intervalP50Ms"`
	IntervalP99Ms float64 `json:"intervalP99Ms"`
	IntervalMaxMs float64 `json:"intervalMaxMs"`
	// Phases are the renewals by the run's phase they happened in (seed,
	// sync, steady, ..., drain: the phases the run entered from the
	// seeding on), with the intervals each of them ended, in the order
	// phases began; a phase without a renewal is left out.
	Phases []NodeHealthPhase `json:"phases"`
	// LeaseExpired counts the nodes that went longer than their Lease's
	// duration (40 s) without a renewal: the node lifecycle controller
	// may mark them NotReady once node-monitor-grace-period passes.
	LeaseExpired int `json:"leaseExpired"`
	// NotReady counts the nodes whose Ready condition left True at least
	// once (Unknown when kube-controller-manager found the Lease stale),
	// Transitions how often that happened, FirstNotReadyMs when it first
	// did after the run began (0: never), StillNotReady those not Ready
	// at the end.
	NotReady        int     `json:"notReady"`
	Transitions     int     `json:"transitions"`
	FirstNotReadyMs float64 `json:"firstNotReadyMs,omitempty"`
	StillNotReady   int     `json:"stillNotReady"`
}

// NodeHealthPhase is NodeHealth's renewals in one phase: Renewals those
// that happened in it, the intervals (ms) those that the renewals ended,
// 0 when none did (a Lease's first renewal seen ends none).
type NodeHealthPhase struct {
	Phase         string  `json:"phase"`
	Renewals      int64   `json:"renewals"`
	IntervalP50Ms float64 `json:"intervalP50Ms"`
	IntervalP99Ms float64 `json:"intervalP99Ms"`
	IntervalMaxMs float64 `json:"intervalMaxMs"`
}

// ComponentExit is a control-plane process that exited on its own during
// a cluster run and was started again, as the kubelet restarts a static
// pod (kube-controller-manager and kube-scheduler exit when they lose
// their leader Lease).
type ComponentExit struct {
	Component string  `json:"component"`
	AtMs      float64 `json:"atMs"`   // after the run began
	Status    string  `json:"status"` // "exit status 1"
}
