package exporter

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/live"
)

// The request kinds of Cost.Requests.
const (
	RequestRange      = "range"
	RequestStatus     = "status"
	RequestMemberList = "member_list"
	RequestAlarmList  = "alarm_list"
)

// Cost is what scans asked of etcd: requests by kind (RequestRange,
// RequestStatus, ...), the keys the Ranges returned (a count_only Range
// returns none) and the bytes of the responses as marshalled (what came
// over the wire, less gRPC's framing). Failed requests count as
// requests and read nothing.
type Cost struct {
	Requests  map[string]int64
	KeysRead  int64
	ReadBytes int64
}

// add adds o to c.
func (c *Cost) add(o Cost) {
	if c.Requests == nil {
		c.Requests = map[string]int64{}
	}
	for k, n := range o.Requests {
		c.Requests[k] += n
	}
	c.KeysRead += o.KeysRead
	c.ReadBytes += o.ReadBytes
}

// costClient is a live.Client that counts what is asked through it. It
// forwards HashKV too, to satisfy live.Client, but the exporter never
// calls it (it costs a member a read of its whole db).
type costClient struct {
	c live.Client

	mu   sync.Mutex
	cost Cost
}

var _ live.Client = (*costClient)(nil)

func (c *costClient) count(kind string, keys int, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cost.Requests == nil {
		c.cost.Requests = map[string]int64{}
	}
	c.cost.Requests[kind]++
	c.cost.KeysRead += int64(keys)
	c.cost.ReadBytes += int64(bytes)
}

// take returns the cost counted since the last take and starts afresh.
func (c *costClient) take() Cost {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.cost
	c.cost = Cost{}
	return o
}

func (c *costClient) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	r, err := c.c.Get(ctx, key, opts...)
	if err != nil {
		c.count(RequestRange, 0, 0)
		return r, err
	}
	c.count(RequestRange, len(r.Kvs), proto.Size((*pb.RangeResponse)(r)))
	return r, nil
}

func (c *costClient) Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	r, err := c.c.Status(ctx, endpoint)
	if err != nil {
		c.count(RequestStatus, 0, 0)
		return r, err
	}
	c.count(RequestStatus, 0, proto.Size((*pb.StatusResponse)(r)))
	return r, nil
}

func (c *costClient) MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	r, err := c.c.MemberList(ctx, opts...)
	if err != nil {
		c.count(RequestMemberList, 0, 0)
		return r, err
	}
	c.count(RequestMemberList, 0, proto.Size((*pb.MemberListResponse)(r)))
	return r, nil
}

func (c *costClient) AlarmList(ctx context.Context) (*clientv3.AlarmResponse, error) {
	r, err := c.c.AlarmList(ctx)
	if err != nil {
		c.count(RequestAlarmList, 0, 0)
		return r, err
	}
	c.count(RequestAlarmList, 0, proto.Size((*pb.AlarmResponse)(r)))
	return r, nil
}

func (c *costClient) HashKV(ctx context.Context, endpoint string, rev int64) (*clientv3.HashKVResponse, error) {
	return c.c.HashKV(ctx, endpoint, rev)
}
