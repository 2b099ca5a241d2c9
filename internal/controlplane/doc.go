// Package controlplane runs a Kubernetes control plane on loopback in
// front of an etcd the caller started: kube-apiserver
// (internal/apiserverproc), kube-controller-manager and kube-scheduler of
// one Kubernetes release, and KWOK, which simulates the nodes and pods a
// cluster's kubelets would run. Everything is the upstream code, unmodified;
// only the kubelets are simulated.
//
// # Identities
//
// Start generates one PKI in Go (apiserverproc's CA, serving certificate,
// service-account key pair and admin token) and signs a client certificate
// per component, each with a kubeconfig of its own:
// system:kube-controller-manager and system:kube-scheduler, the users
// Kubernetes' bootstrap RBAC policy binds the components' roles to (as
// kubeadm's controller-manager.conf and scheduler.conf do), and KWOK in
// group system:masters (kwokctl gives it an admin kubeconfig too).
// kube-controller-manager runs each controller with its own service-account
// credentials (--use-service-account-credentials, as kubeadm sets it), so
// the token and serviceaccount controllers run as they do in a cluster, and
// kube-apiserver keeps its ServiceAccount admission plugin on.
//
// # What runs
//
// kube-apiserver: --authorization-mode Node,RBAC, --client-ca-file,
// --service-account-issuer and key pair. kube-controller-manager: every
// controller ('*': with no cloud provider and no --allocate-node-cidrs it
// skips node-ipam, route, service-lb and cloud-node-lifecycle itself), the
// CA as cluster signer and root CA, leader election on.
// kube-scheduler: leader election on. Both at --kube-api-qps 100, --kube-api-burst 200
// unless Config says otherwise. KWOK: the default stages
// (apiserverproc.KWOKStageFiles), managing only nodes annotated
// kwok.x-k8s.io/node=fake (NewNode), with 40 s node leases, which it
// renews every 10-10.4 s (lease duration / 4 plus up to 4 % jitter:
// sigs.k8s.io/kwok pkg/kwok/controllers/controller.go, after the kubelet's
// pkg/kubelet/kubelet.go and component-helpers' lease controller).
//
// # Processes
//
// Every process runs in a directory of its own under Config.Dir (its log,
// --cert-dir, HOME), on free loopback ports, with an environment of PATH
// and HOME only (no ETCD_* or KUBECONFIG from the caller). Start waits for
// each component before the next (kube-apiserver /readyz, the
// controller-manager and scheduler holding their leader-election Leases in
// kube-system, kwok's /healthz); a component that fails or exits is
// reported with the last lines of its log. Only processes started here are
// signalled, always by PID: SIGTERM, then SIGKILL after Config.StopTimeout.
//
// # Binaries
//
// Binaries are resolved, and built when missing, by apiserverproc.Component:
// scripts/build-kube.sh for the three Kubernetes components (kube-apiserver
// 10-40 minutes on 2 cores the first time, kube-controller-manager 2-9
// minutes and kube-scheduler 10-60 s after it), scripts/build-kwok.sh for
// KWOK (1-5 minutes).
package controlplane
