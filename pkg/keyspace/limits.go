package keyspace

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxValueBytes is the largest value Document decodes, in bytes: 64 MiB,
// six times the largest --max-request-bytes etcd recommends (10 MiB,
// server/embed/config.go), so that no value a member accepted is refused
// while the memory a decoded object takes stays bounded.
const MaxValueBytes = 64 << 20

// MaxNestingDepth is the deepest nesting of messages (protobuf) or of
// objects and arrays (JSON) Document decodes. It is the limit of
// google.golang.org/protobuf's decoder (protowire.DefaultRecursionLimit)
// and of Go's and Kubernetes' JSON decoders (encoding/json,
// sigs.k8s.io/json), so that kube-apiserver could never have accepted a
// deeper object through its API; Kubernetes' gogo-generated protobuf
// decoder has no limit and recurses once per level, which a crafted value
// a few hundred thousand levels deep turns into a fatal stack overflow.
// CBOR values are bounded by the CBOR decoder's own nesting limit.
const MaxNestingDepth = 10000

// ErrValueLimit is returned (wrapped) by Document and CheckValueLimits for
// a value longer than MaxValueBytes or nested deeper than
// MaxNestingDepth; such a value is not decoded.
var ErrValueLimit = errors.New("value exceeds etcdinspect's decoding limit")

// CheckValueLimits returns an error wrapping ErrValueLimit, naming the
// limit, when v is longer than MaxValueBytes or, read as the protobuf or
// JSON value it starts like (DetectValue), nests deeper than
// MaxNestingDepth. It reads v once, in time linear in its length, and
// never recurses deeper than MaxNestingDepth.
func CheckValueLimits(v []byte) error {
	if len(v) > MaxValueBytes {
		return fmt.Errorf("%w: %d bytes, above the limit of %d bytes", ErrValueLimit, len(v), MaxValueBytes)
	}
	enc, depth := EncodingOther, 0
	switch trimmed := bytes.TrimLeft(v, " \t\r\n"); {
	case bytes.HasPrefix(v, ProtobufPrefix):
		enc = EncodingProtobuf
		depth, _ = protobufDepth(v[len(ProtobufPrefix):], MaxNestingDepth)
	case len(trimmed) > 0 && trimmed[0] == '{':
		enc = EncodingJSON
		depth = jsonDepth(trimmed, MaxNestingDepth)
	}
	if depth > MaxNestingDepth {
		return fmt.Errorf("%w: %s nested deeper than %d levels", ErrValueLimit, enc, MaxNestingDepth)
	}
	return nil
}

// protobufDepth returns how deeply messages nest in b read as a protobuf
// message without its schema: 1, plus the depth of the deepest
// length-delimited field that itself reads as a well-formed message (a
// string or bytes field may read as one too, which can only overstate the
// depth). ok is false when b is not a well-formed message. It stops as
// soon as the depth exceeds limit (>= 1), returning a depth above limit.
//
// Each call reads only the field headers of its own level and skips
// nested fields by their length, so a whole value is read once.
func protobufDepth(b []byte, limit int) (depth int, ok bool) {
	depth = 1
	for len(b) > 0 {
		nested, n := protobufField(b)
		if n < 0 {
			return depth, false
		}
		b = b[n:]
		switch {
		case nested == nil:
		case limit <= 1:
			// One more level exceeds the limit: only check that the
			// field reads as a message.
			if protobufLevel(nested) {
				return 2, true
			}
		default:
			if d, ok := protobufDepth(nested, limit-1); ok && 1+d > depth {
				depth = 1 + d
				if depth > limit {
					return depth, true
				}
			}
		}
	}
	return depth, true
}

// protobufLevel reports whether b reads as a sequence of protobuf fields,
// without looking inside length-delimited ones.
func protobufLevel(b []byte) bool {
	for len(b) > 0 {
		_, n := protobufField(b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// protobufField reads the field at the start of b and returns its length
// n (negative when malformed) and, for a length-delimited field, its
// content. Groups, which no Kubernetes type has, are malformed here.
func protobufField(b []byte) (nested []byte, n int) {
	num, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 || num <= 0 {
		return nil, -1
	}
	switch typ {
	case protowire.BytesType:
		v, vn := protowire.ConsumeBytes(b[tn:])
		if vn < 0 {
			return nil, -1
		}
		if v == nil {
			v = []byte{}
		}
		return v, tn + vn
	case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
		vn := protowire.ConsumeFieldValue(num, typ, b[tn:])
		if vn < 0 {
			return nil, -1
		}
		return nil, tn + vn
	}
	return nil, -1
}

// jsonDepth returns how deeply objects and arrays nest in the JSON text
// b, counting brackets outside strings, or limit+1 as soon as it exceeds
// limit. Malformed JSON is left to the decoder.
func jsonDepth(b []byte, limit int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
