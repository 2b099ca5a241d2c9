package kubeload

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/pkg/compaction"
)

// APIProbe is a compaction.ProbeKV through kube-apiserver: the probe's
// key is one configmap, written with a merge PATCH of its data (one etcd
// transaction after kube-apiserver's read of the object) and read with a
// GET at resourceVersion "", which kube-apiserver serves from etcd with
// the watch cache on too (k8s.io/apiserver/pkg/storage/cacher/delegator.go
// Get), as an ordinary client of the API would. Its responses are nil:
// the probe reads only their errors.
type APIProbe struct {
	cms       configMapPatcher
	namespace string
	name      string
}

// configMapPatcher is what APIProbe uses of client-go's configmaps.
type configMapPatcher interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.ConfigMap, error)
}

var _ compaction.ProbeKV = (*APIProbe)(nil)

// NewAPIProbe creates namespace (if it does not exist) and the configmap
// name in it through cfg's kube-apiserver, on a client of its own, and
// returns the probe's target.
func NewAPIProbe(ctx context.Context, cfg *rest.Config, namespace, name string) (*APIProbe, error) {
	cs, err := kubernetes.NewForConfig(clientConfig(cfg))
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s for the probe: %w", namespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{"at": ""}}
	if _, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create configmap %s/%s for the probe: %w", namespace, name, err)
	}
	return &APIProbe{cms: cs.CoreV1().ConfigMaps(namespace), namespace: namespace, name: name}, nil
}

// Put implements compaction.ProbeKV: the configmap's data "at" becomes val
// (key is ignored: the configmap is the key).
func (p *APIProbe) Put(ctx context.Context, _, val string, _ ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"at": val}})
	if err != nil {
		return nil, err
	}
	_, err = p.cms.Patch(ctx, p.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return nil, err
}

// Get implements compaction.ProbeKV: a GET of the configmap.
func (p *APIProbe) Get(ctx context.Context, _ string, _ ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	_, err := p.cms.Get(ctx, p.name, metav1.GetOptions{})
	return nil, err
}
