// Package kubeload drives lwbench's list/watch load through real
// Kubernetes: kube-apiservers in front of etcd, client-go clients writing
// and client-go informers watching, measured from outside the upstream
// code.
//
// # Parts
//
//   - APIWorkload performs watchload's plan (objects, schedule, mix)
//     through the API with client-go's typed clients.
//   - InformerSet runs client-go SharedIndexInformers unchanged; their
//     ListerWatcher (listwatch.go) records every LIST, WATCH and WATCHLIST
//     (requests.go), feeds each watch event to a watchload.Observer (the
//     history checks and delivery latency of the etcd-direct run), and can
//     hold an informer back.
//   - Connections gives every informer and writer worker a connection of
//     its own to kube-apiserver, as separate processes have, or one for
//     all (client-go's transport cache would otherwise share one).
//   - NewClients is the client set of a run (watchload.Clients): lwbench
//     run's one script (watchload.Run) seeds, starts the informers and
//     writes through them while kube-apiserver's own compactor runs, holds
//     informers across a compaction and checks the end, into a
//     report.RunResult with its API front sections; an EtcdCounter
//     (internal/etcdproxy) adds what etcd was asked, by the run's phase,
//     and its writes per resource every second; on an etcd lwbench
//     started, etcd's own /metrics every second (db size over time, its
//     counters and disk latency by phase); with a cluster's load, the
//     periodic traffic seen (report.PeriodicTrafficOf).
//   - Compare lays the etcd-direct model's etcd requests beside the real
//     stack's (`lwbench conformance`).
//   - StartStack starts the kube-apiservers (and counting proxies) a load
//     runs through, for lwbench run and for pkg/experiment.
//   - Load and Case are an experiment's load through the real stack (pods
//     seeded by client-go, history recorded) and its cases (informers and
//     writers of their own, held back and validated as a watchload.Case's);
//     APIProbe is the experiments' probe through the API; WatchCompactions
//     follows kube-apiserver's compactor.
//
// # Facts it relies on
//
// A resourceVersion is the etcd mod_revision of the object, or the
// revision of a list (k8s.io/apiserver/pkg/storage/etcd3); client-go reads
// its WatchListClient gate when a reflector is made
// (k8s.io/client-go/tools/cache/reflector.go), so gates are set per
// InformerSet before its informers start (gates.go).
package kubeload
