package compaction_test

import (
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func withRev(rev int64) []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithRev(rev)} }
