package live

import "errors"

// ErrValueReads is returned by Usage when a server is older than etcd 3.7
// and UsageOptions.AllowValueReads is false: its keys_only Ranges read
// every value from disk (etcd issue 20386).
var ErrValueReads = errors.New("etcd before 3.7 reads every value from disk to answer a keys_only Range (etcd issue 20386)")

// ErrUnknownMember is returned by ChooseMember when no member has the
// name, endpoint or member ID asked for.
var ErrUnknownMember = errors.New("no such member")
