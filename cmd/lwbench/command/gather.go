package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/experiment"
	"github.com/kubestore/etcdkit/pkg/report"
)

// gatherTailLines is how many of a pod's last log lines gather asks for.
// The result line is printed after everything else (lwbench worker
// --log-result, lwbench scrape --log-result), but the node keeps a line
// longer than the container runtime's maximum as several partial records,
// each a line of the log file that tailLines counts (the CRI log format,
// k8s.io/cri-client pkg/logs; containerd's max_container_log_line_size is
// 16 KiB), and a worker's result line with its histograms may be hundreds
// of KiB: 10,000 records hold a result line of 156 MiB at 16 KiB a record,
// more than the bytes gather reads (maxResultLineBytes).
const gatherTailLines = 10000

// gatherPollInterval is how often gather --wait lists the Job's pods again.
const gatherPollInterval = 2 * time.Second

// gatherOptions are `lwbench gather`'s: where the Jobs are, how long to
// wait for them, and merge's output flags.
type gatherOptions struct {
	out        outputOptions
	kubeconfig string
	context    string
	namespace  string
	job        string
	scrapeJob  string
	wait       time.Duration
	// maxLogBytes bounds each log read; 0 means maxResultLineBytes
	// (tests set less).
	maxLogBytes int64
	flags       *pflag.FlagSet
}

func (o *gatherOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster the load ran on (default: client-go's loading rules: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context to use (default: its current-context)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the Jobs (default: the kubeconfig context's namespace, else default)")
	fs.StringVar(&o.job, "job", "", "the workers' Indexed Job (lwbench manifest --name): one succeeded pod per completion index, whose logs hold the workers' results")
	fs.StringVar(&o.scrapeJob, "scrape-job", "", "the Job of lwbench scrape (lwbench manifest prints NAME-scrape): its pod's log holds etcd's own /metrics per phase, set beside the merged figures")
	fs.DurationVar(&o.wait, "wait", 0, "wait up to this long for every pod to end (0: gather what has ended now, and name the pods still running)")
	o.flags = fs
}

func (o *gatherOptions) Validate() error {
	switch {
	case o.job == "":
		return cli.FlagErrorf("--job: give the workers' Job (lwbench manifest --name)")
	case o.wait < 0:
		return cli.FlagErrorf("--wait %v: want 0 or more", o.wait)
	}
	return nil
}

// newGatherCommand returns `lwbench gather`; runF replaces the gathering
// in flag tests.
func newGatherCommand(runF func(*cobra.Command, *gatherOptions) error) *cobra.Command {
	o := &gatherOptions{}
	cmd := &cobra.Command{
		Use:   "gather --job NAME [--scrape-job NAME-scrape]",
		Short: "Collect the results of a load run as lwbench manifest's Indexed Job and merge them",
		Args:  cobra.NoArgs,
		Long: `gather reads, through the cluster's API, the log of each pod of the workers'
Indexed Job (lwbench manifest), takes each worker's result from its last
"lwbench-result" line, and merges them as lwbench merge does (the same
reader and the same merge). It wants exactly one succeeded pod per completion
index of the Job; an index with no pod, a failed pod or one still running is
named in a one-line error (exit 1). The workers of lwbench manifest
--experiment (relist-storm, catchup) are merged as that experiment's
--workers merges them, and printed as the experiment prints its result. With --scrape-job the log of lwbench
scrape's pod gives etcd's own figures per phase, as merge --etcd-metrics.
Each log is read from its last 10,000 lines, at most 64 MiB; a log whose
result line is missing or larger is refused.`,
		Example: `  lwbench gather --namespace lwbench-load --job load1 --scrape-job load1-scrape --wait 1h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd, o)
			}
			return runGather(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	o.out.registerCompletion(cmd)
	return cmd
}

// clientset loads the kubeconfig with client-go's loading rules
// (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) and returns a
// client set and the namespace (--namespace, else the context's, else
// default).
func (o *gatherOptions) clientset() (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns := o.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig: %w", err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	return cs, ns, nil
}

// runGather gathers the workers' results (and scrape's figures) and
// merges them as lwbench merge does (mergeWorkerResults), or, for an
// experiment's workers, as its --workers does (gatherExperiment).
func runGather(ctx context.Context, o *gatherOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	cs, ns, err := o.clientset()
	if err != nil {
		return err
	}
	limit := o.maxLogBytes
	if limit == 0 {
		limit = maxResultLineBytes
	}
	logs, names, err := gatherLogs(ctx, cs, ns, o.job, o.wait, limit)
	if err != nil {
		return err
	}
	if isExperimentWorker(logs[0]) {
		return gatherExperiment(o, ns, logs, names, out)
	}
	results, err := decodeWorkers(ns, o.job, logs, names)
	if err != nil {
		return err
	}
	var m *report.ServerMetrics
	metricsName := ""
	if o.scrapeJob != "" {
		pods, err := waitJobPods(ctx, cs, ns, o.scrapeJob, false, o.wait)
		if err != nil {
			return err
		}
		metricsName = "--scrape-job " + o.scrapeJob + " pod " + pods[0].pod.Name
		b, err := podLog(ctx, cs, pods[0].pod, pods[0].container, limit)
		if err != nil {
			return err
		}
		if m, err = decodeServerMetrics(b); err != nil {
			return fmt.Errorf("%s: %w", metricsName, err)
		}
	}
	return mergeWorkerResults(&o.out, names, results, metricsName, m, out, errOut)
}

// gatherLogs reads the log of every completion index of the workers'
// Indexed Job from its succeeded pod (waitJobPods, podLog), in index
// order, with each log's name ("pod NAME (index I)"). The logs hold
// together at most report.MaxTotalDocumentBytes; each is read with
// podLog's bound limit.
func gatherLogs(ctx context.Context, cs kubernetes.Interface, ns, job string, wait time.Duration, limit int64) ([][]byte, []string, error) {
	pods, err := waitJobPods(ctx, cs, ns, job, true, wait)
	if err != nil {
		return nil, nil, err
	}
	var logs [][]byte
	var names []string
	var total int64
	for i, p := range pods {
		name := fmt.Sprintf("pod %s (index %d)", p.pod.Name, i)
		b, err := podLog(ctx, cs, p.pod, p.container, limit)
		if err != nil {
			return nil, nil, err
		}
		if total += int64(len(b)); total > report.MaxTotalDocumentBytes {
			return nil, nil, fmt.Errorf("%s: its log brings the logs read to %d bytes, more than %d", name, total, report.MaxTotalDocumentBytes)
		}
		logs, names = append(logs, b), append(names, name)
	}
	return logs, names, nil
}

// decodeWorkers decodes the result of each worker of a load from its
// log (decodeWorkerResult), logs[i] being completion index i's; a
// worker's shard must be its pod's index.
func decodeWorkers(ns, job string, logs [][]byte, names []string) ([]*report.RunResult, error) {
	var results []*report.RunResult
	for i, b := range logs {
		r, err := decodeWorkerResult(b)
		if err != nil {
			return nil, fmt.Errorf("job %s/%s %s: %w", ns, job, names[i], err)
		}
		if r.Shard.Index != i {
			return nil, fmt.Errorf("job %s/%s %s: its result is shard %s, not its completion index", ns, job, names[i], r.Shard)
		}
		results = append(results, r)
	}
	return results, nil
}

// gatherExperiment decodes and merges the results of the workers of a
// divided experiment (lwbench manifest --experiment) from their logs
// (decodeExperimentWorker, mergeExperimentWorkers), logs[i] being
// completion index i's, whose shard it must be. --scrape-job, a load's,
// is refused.
func gatherExperiment(o *gatherOptions, ns string, logs [][]byte, names []string, out io.Writer) error {
	if o.scrapeJob != "" {
		return cli.FlagErrorf("--scrape-job: job %s/%s ran an experiment's workers; lwbench scrape follows a load's phases", ns, o.job)
	}
	var results []*experiment.Result
	for i, b := range logs {
		r, err := decodeExperimentWorker(b)
		if err != nil {
			return fmt.Errorf("job %s/%s %s: %w", ns, o.job, names[i], err)
		}
		if r.Shard.Index != i {
			return fmt.Errorf("job %s/%s %s: its result is shard %s, not its completion index", ns, o.job, names[i], r.Shard)
		}
		results = append(results, r)
	}
	return mergeExperimentWorkers(o.out.format, names, results, out)
}

// jobPod is the pod gather reads a completion's log from, and the
// container that printed it (the Job's first).
type jobPod struct {
	pod       *corev1.Pod
	container string
}

// waitJobPods returns the succeeded pod of every completion of the Job:
// for an Indexed Job (indexed) one per completion index 0..completions-1,
// in index order (the index of a pod is its
// batch.kubernetes.io/job-completion-index annotation), else one. Until
// wait passes (never with 0) it lists the Job's pods (the Job's selector)
// again every gatherPollInterval while a completion has a pod pending or
// running, or none; a failed pod with no other pod for its completion
// ends the wait at once (the load failed: the manifest's backoffLimit is
// 0). The error is one line naming each completion that has no succeeded
// pod and why; ctx ends the wait with its error.
func waitJobPods(ctx context.Context, cs kubernetes.Interface, ns, name string, indexed bool, wait time.Duration) ([]jobPod, error) {
	j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("job %s/%s not found", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s/%s: %w", ns, name, err)
	}
	n := 1
	if indexed {
		if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
			return nil, fmt.Errorf("job %s/%s is not an Indexed Job (completionMode Indexed): not lwbench manifest's workers", ns, name)
		}
		n = int(ptr.Deref(j.Spec.Completions, 1))
	}
	if len(j.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("job %s/%s has no container", ns, name)
	}
	container := j.Spec.Template.Spec.Containers[0].Name
	sel := labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: name})
	if j.Spec.Selector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(j.Spec.Selector); err != nil {
			return nil, fmt.Errorf("job %s/%s: its selector: %w", ns, name, err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("job %s/%s: list its pods: %w", ns, name, err)
		}
		pods, waiting, problems := completionPods(list.Items, n, indexed)
		if len(problems) == 0 {
			out := make([]jobPod, n)
			for i, p := range pods {
				out[i] = jobPod{pod: p, container: container}
			}
			return out, nil
		}
		if !waiting || time.Now().After(deadline) {
			why := ""
			if waiting && wait > 0 {
				why = fmt.Sprintf(" after waiting %v", wait)
			} else if waiting {
				why = " (--wait DURATION waits for them)"
			}
			return nil, fmt.Errorf("job %s/%s%s: %s", ns, name, why, strings.Join(problems, "; "))
		}
		t := time.NewTimer(gatherPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("job %s/%s: %s: %w", ns, name, strings.Join(problems, "; "), ctx.Err())
		case <-t.C:
		}
	}
}

// completionPods sorts the pods of a Job into its n completions (by the
// completion index annotation when indexed) and returns the succeeded pod
// of each (the last created, if several), whether to wait for more (a
// completion has a pod pending or running, or none, and no completion
// failed for good: one failed pod and nothing after it, which fails the
// load), and, by completion, why each completion has none.
func completionPods(items []corev1.Pod, n int, indexed bool) (pods []*corev1.Pod, waiting bool, problems []string) {
	byIndex := make([][]*corev1.Pod, n)
	var stray []string
	for i := range items {
		p := &items[i]
		idx := 0
		if indexed {
			v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			if !ok {
				v, ok = p.Labels[batchv1.JobCompletionIndexAnnotation]
			}
			var err error
			if idx, err = strconv.Atoi(v); !ok || err != nil || idx < 0 || idx >= n {
				stray = append(stray, fmt.Sprintf("pod %s has completion index %q, not one of 0..%d", p.Name, v, n-1))
				continue
			}
		}
		byIndex[idx] = append(byIndex[idx], p)
	}
	pods = make([]*corev1.Pod, n)
	failedForGood := false
	for i, ps := range byIndex {
		sort.Slice(ps, func(a, b int) bool { return ps[a].CreationTimestamp.Before(&ps[b].CreationTimestamp) })
		what := "the pod"
		if indexed {
			what = fmt.Sprintf("index %d", i)
		}
		var failed, running []string
		for _, p := range ps {
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				pods[i] = p
			case corev1.PodFailed:
				failed = append(failed, p.Name+" failed"+podFailure(p))
			default:
				running = append(running, fmt.Sprintf("%s is %s", p.Name, orUnknown(string(p.Status.Phase))))
			}
		}
		switch {
		case pods[i] != nil:
		case len(running) > 0:
			waiting = true
			problems = append(problems, what+": pod "+strings.Join(running, ", "))
		case len(failed) > 0:
			failedForGood = true
			problems = append(problems, what+": pod "+strings.Join(failed, ", "))
		default:
			waiting = true
			problems = append(problems, what+": no pod")
		}
	}
	return pods, waiting && !failedForGood, append(problems, stray...)
}

// podFailure says why a failed pod failed: its reason and message, and
// the exit code and reason of a container that ended with one.
func podFailure(p *corev1.Pod) string {
	var parts []string
	if p.Status.Reason != "" {
		parts = append(parts, p.Status.Reason)
	}
	if p.Status.Message != "" {
		parts = append(parts, p.Status.Message)
	}
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			parts = append(parts, fmt.Sprintf("container %s exit code %d %s", c.Name, t.ExitCode, t.Reason))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.TrimSpace(strings.Join(parts, ": ")) + ")"
}

func orUnknown(s string) string {
	if s == "" {
		return "in no phase yet"
	}
	return s
}

// podLog reads the last gatherTailLines lines of container's log in pod
// through the API (pods/log: kube-apiserver asks the node's kubelet), at
// most limit bytes: it asks for one byte more (limitBytes) and refuses a
// log that gives it, since the result line may then be cut. The error
// names the pod.
func podLog(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, container string, limit int64) ([]byte, error) {
	req := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container:  container,
		TailLines:  ptr.To[int64](gatherTailLines),
		LimitBytes: ptr.To(limit + 1),
	})
	r, err := req.Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: read its log: %w", p.Namespace, p.Name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: read its log: %w", p.Namespace, p.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("pod %s/%s: the last %d lines of its log are more than %d bytes: its result line may be cut", p.Namespace, p.Name, gatherTailLines, limit)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, errEmptyLog)
	}
	return b, nil
}

// errEmptyLog is returned by podLog when the API gave no log at all.
var errEmptyLog = errors.New("its log is empty")
