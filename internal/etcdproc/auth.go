package etcdproc

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EnableAuth creates the root user with rootPassword, gives it the root
// role and turns authentication on, as `etcdctl user add root`,
// `etcdctl user grant-role root root` and `etcdctl auth enable` do. c must
// be a client without credentials, used before auth is on.
func EnableAuth(ctx context.Context, c *clientv3.Client, rootPassword string) error {
	if _, err := c.UserAdd(ctx, "root", rootPassword); err != nil {
		return fmt.Errorf("add root user: %w", err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("grant root role: %w", err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable auth: %w", err)
	}
	return nil
}

// AddPrefixUser creates user with password and a role of the same name
// that may read and write only keys under prefix, the least a benchmark
// confined to its prefix needs. c must be authenticated as root (or be
// used before auth is enabled).
func AddPrefixUser(ctx context.Context, c *clientv3.Client, user, password, prefix string) error {
	if _, err := c.RoleAdd(ctx, user); err != nil {
		return fmt.Errorf("add role %s: %w", user, err)
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	if _, err := c.RoleGrantPermission(ctx, user, prefix, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return fmt.Errorf("grant %s read-write on %s: %w", user, prefix, err)
	}
	if _, err := c.UserAdd(ctx, user, password); err != nil {
		return fmt.Errorf("add user %s: %w", user, err)
	}
	if _, err := c.UserGrantRole(ctx, user, user); err != nil {
		return fmt.Errorf("grant role %s to %s: %w", user, user, err)
	}
	return nil
}
