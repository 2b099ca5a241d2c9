package keyspace

import (
	"bytes"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1alpha1 "k8s.io/api/admissionregistration/v1alpha1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1alpha1 "k8s.io/api/certificates/v1alpha1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta1 "k8s.io/api/flowcontrol/v1beta1"
	flowcontrolv1beta2 "k8s.io/api/flowcontrol/v1beta2"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	nodev1 "k8s.io/api/node/v1"
	nodev1alpha1 "k8s.io/api/node/v1alpha1"
	nodev1beta1 "k8s.io/api/node/v1beta1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1alpha1 "k8s.io/api/rbac/v1alpha1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	storagev1alpha1 "k8s.io/api/storage/v1alpha1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	storagemigrationv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// schemeBuilders register every API group and version of k8s.io/api that
// kube-apiserver serves from etcd, at every version, because the storage
// version differs between resources and releases (test/integration/etcd/
// data.go ExpectedGVK: HPAs as autoscaling/v2, MutatingAdmissionPolicies as
// admissionregistration.k8s.io/v1beta1, ...). Groups that are never stored
// (admission, authentication, authorization reviews) are left out.
// kube-apiserver's two other stored groups live outside k8s.io/api:
// CustomResourceDefinitions (k8s.io/apiextensions-apiserver), stored as
// apiextensions.k8s.io/v1beta1 protobuf because that serialization is the
// more compact (CreateAPIExtensionsConfig sets the storage
// EncodeVersioner to v1beta1: kubernetes pkg/controlplane/apiserver/
// apiextensions.go, cmd/kube-apiserver/app/apiextensions.go before 1.30;
// ExpectedGVK in test/integration/etcd/data.go), and APIServices
// (k8s.io/kube-aggregator, apiregistration.k8s.io/v1, v1beta1 before 1.10).
var schemeBuilders = []func(*runtime.Scheme) error{
	admissionregistrationv1.AddToScheme, admissionregistrationv1alpha1.AddToScheme, admissionregistrationv1beta1.AddToScheme, apiserverinternalv1alpha1.AddToScheme,
	appsv1.AddToScheme, appsv1beta1.AddToScheme, appsv1beta2.AddToScheme, autoscalingv1.AddToScheme,
	autoscalingv2.AddToScheme, batchv1.AddToScheme, batchv1beta1.AddToScheme, certificatesv1.AddToScheme,
	certificatesv1alpha1.AddToScheme, certificatesv1beta1.AddToScheme, coordinationv1.AddToScheme, coordinationv1alpha2.AddToScheme,
	coordinationv1beta1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme, discoveryv1beta1.AddToScheme,
	eventsv1.AddToScheme, eventsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme, flowcontrolv1.AddToScheme,
	flowcontrolv1beta1.AddToScheme, flowcontrolv1beta2.AddToScheme, flowcontrolv1beta3.AddToScheme, lifecyclev1alpha1.AddToScheme,
	networkingv1.AddToScheme, networkingv1beta1.AddToScheme, nodev1.AddToScheme, nodev1alpha1.AddToScheme,
	nodev1beta1.AddToScheme, policyv1.AddToScheme, policyv1beta1.AddToScheme, rbacv1.AddToScheme,
	rbacv1alpha1.AddToScheme, rbacv1beta1.AddToScheme, resourcev1.AddToScheme, resourcev1alpha3.AddToScheme,
	resourcev1beta1.AddToScheme, resourcev1beta2.AddToScheme, schedulingv1.AddToScheme, schedulingv1alpha3.AddToScheme,
	schedulingv1beta1.AddToScheme, storagev1.AddToScheme, storagev1alpha1.AddToScheme, storagev1beta1.AddToScheme,
	storagemigrationv1.AddToScheme, storagemigrationv1beta1.AddToScheme,
	apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme, apiregistrationv1.AddToScheme, apiregistrationv1beta1.AddToScheme,
}

// Codec encodes objects exactly as kube-apiserver stores them and decodes
// stored values back, with Kubernetes' own scheme and protobuf serializer.
// A Codec is safe for concurrent use.
type Codec struct {
	scheme  *runtime.Scheme
	factory serializer.CodecFactory
	proto   *protobuf.Serializer
}

// NewCodec returns a Codec for the built-in API groups, CustomResourceDefinitions
// and APIServices.
func NewCodec() (*Codec, error) {
	scheme := runtime.NewScheme()
	for _, add := range schemeBuilders {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return &Codec{
		scheme:  scheme,
		factory: serializer.NewCodecFactory(scheme),
		proto:   protobuf.NewSerializer(scheme, scheme),
	}, nil
}

// Encode returns obj's storage bytes: "k8s\x00" and a runtime.Unknown
// envelope with apiVersion, kind and the protobuf object, with
// metadata.resourceVersion and selfLink cleared as
// APIObjectVersioner.PrepareObjectForStorage does before every write
// (k8s.io/apiserver/pkg/storage/api_object_versioner.go). obj itself is not
// modified. It fails for a type outside the Codec's scheme.
func (c *Codec) Encode(obj runtime.Object) ([]byte, error) {
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	obj = obj.DeepCopyObject()
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	accessor.SetResourceVersion("")
	accessor.SetSelfLink("")
	var buf bytes.Buffer
	enc := c.factory.EncoderForVersion(c.proto, gvks[0].GroupVersion())
	if err := enc.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encode %s: %w", gvks[0].Kind, err)
	}
	return buf.Bytes(), nil
}

// Decode decodes a stored protobuf or JSON value of a built-in type and sets
// metadata.resourceVersion from modRevision, as kube-apiserver does on every
// read (k8s.io/apiserver/pkg/storage/etcd3/store.go decode). It fails for a
// value of a type outside the scheme, an encrypted value or malformed bytes.
func (c *Codec) Decode(value []byte, modRevision int64) (runtime.Object, error) {
	obj, _, err := c.factory.UniversalDeserializer().Decode(value, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode value: %w", err)
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("decode value: %w", err)
	}
	accessor.SetResourceVersion(revision.ObjectResourceVersion(modRevision))
	return obj, nil
}
