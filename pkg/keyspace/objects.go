package keyspace

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Generator makes realistic Kubernetes objects for a load: Pods shaped like
// those a Deployment's ReplicaSet creates and the kubelet then updates, with
// owner references, probes, a projected service account token volume,
// status conditions and managedFields, which together make up most of a
// real Pod's 3 to 6 KiB in etcd. Each object is what kube-apiserver stores
// for it: the fields its registry strategy sets or resets on create, and
// the managedFields its field manager records for the writes that made it
// (managedfields.go). The same seed, names and generation always give the
// same object. A Generator is not safe for concurrent use; give each
// goroutine its own.
type Generator struct {
	seed uint64
	// Epoch is the creation time stamped on every object. The zero value
	// uses 2026-01-01T00:00:00Z so that outputs are reproducible.
	Epoch time.Time
}

// NewGenerator returns a Generator whose random choices derive from seed.
func NewGenerator(seed uint64) *Generator { return &Generator{seed: seed} }

func (g *Generator) rng(parts ...string) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= 1099511628211
		}
		h ^= '/'
		h *= 1099511628211
	}
	return rand.New(rand.NewPCG(g.seed, h))
}

func (g *Generator) epoch() time.Time {
	if g.Epoch.IsZero() {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return g.Epoch
}

const hexDigits = "0123456789abcdef"
const alnum = "bcdfghjklmnpqrstvwxz2456789"

func randString(r *rand.Rand, alphabet string, n int) string {
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func uid(r *rand.Rand) types.UID {
	s := randString(r, hexDigits, 32)
	return types.UID(s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32])
}

// apps are the workloads pods are drawn from, each with its image and port.
var apps = []struct{ name, image string }{
	{"checkout", "registry.example.com/shop/checkout:v2.14.3"},
	{"frontend", "registry.example.com/shop/frontend:v5.2.0"},
	{"payments", "registry.example.com/shop/payments:v1.9.11"},
	{"catalog", "registry.example.com/shop/catalog:v3.0.7"},
	{"nginx-ingress", "registry.k8s.io/ingress-nginx/controller:v1.13.1"},
	{"redis", "docker.io/library/redis:7.4.2"},
}

// Pod returns the Pod namespace/name after `generation` kubelet status
// updates. Generation 0 is the pod as kube-apiserver stores its create
// (k8s.io/kubernetes/pkg/registry/core/pod/strategy.go PrepareForCreate):
// metadata.generation 1, status reset to phase Pending and its QoS class,
// and one managedFields entry, PodCreatorManager's. Generation n >= 1 is
// the pod after the kubelet's n-th status update (PodStatusManager's entry,
// subresource status, beside it): running, every generation changing
// status timestamps and restart counts, as the kubelet's status manager
// does; metadata, spec and uid stay the same, as they do for a real pod.
// The pods are bound to a node from the start (spec.nodeName), as the
// writers create them.
func (g *Generator) Pod(namespace, name string, generation int) *corev1.Pod {
	r := g.rng("pod", namespace, name)
	app := apps[r.IntN(len(apps))]
	hash := randString(r, alnum, 10)
	rsName := app.name + "-" + hash
	created := g.epoch().Add(time.Duration(r.IntN(86400)) * time.Second)
	node := fmt.Sprintf("node-%03d.pool-%d.cluster.internal", r.IntN(500), r.IntN(4))
	podIP := fmt.Sprintf("10.%d.%d.%d", 64+r.IntN(64), r.IntN(256), 1+r.IntN(254))
	hostIP := fmt.Sprintf("192.168.%d.%d", r.IntN(256), 1+r.IntN(254))
	tokenVolume := "kube-api-access-" + randString(r, alnum, 5)
	ownerUID := uid(r)
	podUID := uid(r)
	isController := true
	expiration := int64(3607)
	cpu := []string{"100m", "250m", "500m", "1"}[r.IntN(4)]
	mem := []string{"128Mi", "256Mi", "512Mi", "1Gi"}[r.IntN(4)]
	port := int32(8080 + r.IntN(10))

	env := make([]corev1.EnvVar, 0, 8)
	for i := range 4 + r.IntN(5) {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("%s_SETTING_%d", strings.ToUpper(strings.ReplaceAll(app.name, "-", "_")), i), Value: randString(r, alnum, 8+r.IntN(24))})
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})

	probe := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
		InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	mode := int32(420)
	tolerationSeconds := int64(300)
	priority := int32(0)
	enableLinks := true
	preemption := corev1.PreemptLowerPriority
	grace := int64(30)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			GenerateName:      rsName + "-",
			Namespace:         namespace,
			UID:               podUID,
			Generation:        1, // pod strategy PrepareForCreate; only a spec change or a graceful delete bumps it
			CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{
				"app.kubernetes.io/name":    app.name,
				"app.kubernetes.io/part-of": "shop",
				"pod-template-hash":         hash,
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": created.Format(time.RFC3339),
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                fmt.Sprint(port),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: ownerUID,
				Controller: &isController, BlockOwnerDeletion: &isController,
			}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{
				Name: tokenVolume,
				VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: &mode,
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiration, Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					},
				}},
			}},
			Containers: []corev1.Container{{
				Name:  app.name,
				Image: app.image,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				Env:   env,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
				},
				VolumeMounts:             []corev1.VolumeMount{{Name: tokenVolume, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				LivenessProbe:            probe,
				ReadinessProbe:           probe,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			NodeName:                      node,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerationSeconds},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerationSeconds},
			},
			Priority:           &priority,
			EnableServiceLinks: &enableLinks,
			PreemptionPolicy:   &preemption,
		},
	}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{podCreateFields(pod).entry(PodCreatorManager, "", created)}
	if generation == 0 {
		// PrepareForCreate: the status a client sends is dropped; the QoS
		// class of requests below limits is Burstable
		// (k8s.io/kubernetes/pkg/apis/core/helper/qos GetPodQOS).
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
		return pod
	}
	g.setPodStatus(pod, r, created, generation, podIP, hostIP)
	statusAt := created.Add(time.Duration(generation)*7*time.Minute + 10*time.Second)
	pod.ManagedFields = append(pod.ManagedFields, podStatusFields(&pod.Status).entry(PodStatusManager, "status", statusAt))
	return pod
}

func (g *Generator) setPodStatus(pod *corev1.Pod, r *rand.Rand, created time.Time, generation int, podIP, hostIP string) {
	started := created.Add(time.Duration(2+r.IntN(10)) * time.Second)
	// Each generation is a kubelet status update some minutes later: a
	// restart flips readiness and bumps the restart count.
	updated := started.Add(time.Duration(generation) * 7 * time.Minute)
	ready := corev1.ConditionTrue
	if generation%2 == 1 {
		ready = corev1.ConditionFalse
	}
	startedAt := metav1.NewTime(updated)
	cs := pod.Spec.Containers[0]
	isReady := ready == corev1.ConditionTrue
	isStarted := true
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(started)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(updated)},
			{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: metav1.NewTime(updated)},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
		},
		HostIP:    hostIP,
		HostIPs:   []corev1.HostIP{{IP: hostIP}},
		PodIP:     podIP,
		PodIPs:    []corev1.PodIP{{IP: podIP}},
		StartTime: &metav1.Time{Time: created},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:         cs.Name,
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}},
			Ready:        isReady,
			RestartCount: int32(generation / 2),
			Image:        cs.Image,
			ImageID:      cs.Image[:strings.LastIndexByte(cs.Image, ':')] + "@sha256:" + randString(r, hexDigits, 64),
			ContainerID:  "containerd://" + randString(r, hexDigits, 64),
			Started:      &isStarted,
		}},
		QOSClass: corev1.PodQOSBurstable,
	}
}

// ConfigMap returns the ConfigMap namespace/name at the given generation,
// with dataBytes bytes of configuration text spread over a few keys (real
// ConfigMaps range from a few hundred bytes to the 1 MiB limit), written
// by ConfigMapManager (its managedFields entry: labels and data keys).
// Every generation changes the text and the entry's time, an hour later
// each (Helm's releases are not modelled: no Helm labels or annotations).
func (g *Generator) ConfigMap(namespace, name string, generation, dataBytes int) *corev1.ConfigMap {
	r := g.rng("configmap", namespace, name)
	created := g.epoch().Add(time.Duration(r.IntN(86400)) * time.Second)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: uid(r),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{"app.kubernetes.io/part-of": "shop"},
		},
		Data: map[string]string{},
	}
	gr := g.rng("configmap", namespace, name, fmt.Sprint(generation))
	keys := 1 + dataBytes/2048
	for i := range keys {
		var b strings.Builder
		for b.Len() < dataBytes/keys {
			fmt.Fprintf(&b, "%s.%s = %s\n", randString(gr, alnum, 6), randString(gr, alnum, 8), randString(gr, alnum, 12))
		}
		cm.Data[fmt.Sprintf("config-%d.properties", i)] = b.String()
	}
	cm.ManagedFields = []metav1.ManagedFieldsEntry{configMapFields(cm).entry(ConfigMapManager, "", created.Add(time.Duration(generation)*time.Hour))}
	return cm
}

// ConfigMapDataBytes returns the data size of ConfigMap namespace/name,
// drawn once per name from a modelled mixture (not measured data): 60% in
// [256 B, 2 KiB), 30% in [2 KiB, 16 KiB), 9% in [16 KiB, 64 KiB) and 1%
// in [64 KiB, 256 KiB], uniform inside each band. Real ConfigMaps range
// from a few hundred bytes to the 1 MiB object limit; most are small.
func (g *Generator) ConfigMapDataBytes(namespace, name string) int {
	r := g.rng("configmap-size", namespace, name)
	band := r.IntN(100)
	lo, hi := 256, 2048
	switch {
	case band >= 99:
		lo, hi = 64<<10, 256<<10+1
	case band >= 90:
		lo, hi = 16<<10, 64<<10
	case band >= 60:
		lo, hi = 2<<10, 16<<10
	}
	return lo + r.IntN(hi-lo)
}

// eventReasons are what the kubelet and controllers report, with the
// message shapes they use.
var eventReasons = []struct{ reason, kind, message, component string }{
	{"Scheduled", "Normal", "Successfully assigned %s/%s to %s", "default-scheduler"},
	{"Pulling", "Normal", "Pulling image %q", "kubelet"},
	{"Pulled", "Normal", "Successfully pulled image %q in %dms (%dms including waiting). Image size: %d bytes.", "kubelet"},
	{"Created", "Normal", "Created container: %s", "kubelet"},
	{"Started", "Normal", "Started container %s", "kubelet"},
	{"Unhealthy", "Warning", "Readiness probe failed: Get \"http://%s:%d/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)", "kubelet"},
	{"BackOff", "Warning", "Back-off restarting failed container %s in pod %s_%s(%s)", "kubelet"},
	{"Killing", "Normal", "Stopping container %s", "kubelet"},
}

// Event returns the core/v1 Event namespace/name about pod
// namespace/podName, as the kubelet or a controller records it, after
// `count-1` repeats (count 1 is a new event; a repeat bumps count and
// lastTimestamp, as client-go's event correlator does). Events are stored
// under /registry/events/<namespace>/<name> with a lease of kube-apiserver's
// --event-ttl; they are typically 600 to 1,200 bytes in etcd.
func (g *Generator) Event(namespace, name, podName string, count int) *corev1.Event {
	r := g.rng("event", namespace, name)
	app := apps[r.IntN(len(apps))]
	er := eventReasons[r.IntN(len(eventReasons))]
	first := g.epoch().Add(time.Duration(r.IntN(86400)) * time.Second)
	last := first.Add(time.Duration(count-1) * 37 * time.Second)
	node := fmt.Sprintf("node-%03d.pool-%d.cluster.internal", r.IntN(500), r.IntN(4))
	podUID := uid(r)
	var msg string
	switch er.reason {
	case "Scheduled":
		msg = fmt.Sprintf(er.message, namespace, podName, node)
	case "Pulling":
		msg = fmt.Sprintf(er.message, app.image)
	case "Pulled":
		ms := 200 + r.IntN(20000)
		msg = fmt.Sprintf(er.message, app.image, ms, ms+r.IntN(5000), 10_000_000+r.IntN(400_000_000))
	case "Unhealthy":
		msg = fmt.Sprintf(er.message, fmt.Sprintf("10.%d.%d.%d", 64+r.IntN(64), r.IntN(256), 1+r.IntN(254)), 8080+r.IntN(10))
	case "BackOff":
		msg = fmt.Sprintf(er.message, app.name, podName, namespace, podUID)
	default:
		msg = fmt.Sprintf(er.message, app.name)
	}
	source := corev1.EventSource{Component: er.component}
	if er.component == "kubelet" {
		source.Host = node
	}
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: uid(r),
			CreationTimestamp: metav1.NewTime(first),
		},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: namespace, Name: podName, UID: podUID, APIVersion: "v1",
			ResourceVersion: fmt.Sprint(1000 + r.IntN(1_000_000)), FieldPath: "spec.containers{" + app.name + "}",
		},
		Reason:              er.reason,
		Message:             msg,
		Source:              source,
		FirstTimestamp:      metav1.NewTime(first),
		LastTimestamp:       metav1.NewTime(last),
		Count:               int32(count),
		Type:                er.kind,
		EventTime:           metav1.NewMicroTime(time.Time{}),
		ReportingController: er.component,
		ReportingInstance:   source.Host,
	}
	// The recorder's create and its patches are the component's
	// (operation Update, a patch too: handlers/patch.go); each repeat
	// changes the entry's time.
	e.ManagedFields = []metav1.ManagedFieldsEntry{eventFields(e).entry(er.component, "", last)}
	return e
}
