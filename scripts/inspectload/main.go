// Command inspectload makes the benchmark database of
// scripts/inspect-bench.sh: a real etcd member (the binary given by -etcd)
// on free loopback ports receives -pods pod keys, each written -revisions
// times (creation then kubelet status updates, encoded as kube-apiserver
// stores them), never compacted; the member is stopped by PID and its bbolt
// file moved to -out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

func main() {
	etcdBin := flag.String("etcd", "", "etcd server binary")
	out := flag.String("out", "", "where to write the database file")
	pods := flag.Int("pods", 10000, "pod keys")
	revisions := flag.Int("revisions", 25, "revisions per pod key (1 create + updates)")
	namespaces := flag.Int("namespaces", 20, "namespaces the pods are spread across")
	workers := flag.Int("concurrency", 32, "concurrent writers")
	flag.Parse()
	if *etcdBin == "" || *out == "" {
		log.Fatal("inspectload: -etcd and -out are required")
	}
	if err := run(*etcdBin, *out, *pods, *revisions, *namespaces, *workers); err != nil {
		log.Fatalf("inspectload: %v", err)
	}
}

func run(etcdBin, out string, pods, revisions, namespaces, workers int) error {
	ctx := context.Background()
	work, err := os.MkdirTemp(filepath.Dir(out), "inspectload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	p, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: filepath.Dir(etcdBin), Dir: work,
		ExtraArgs: []string{"--quota-backend-bytes", fmt.Sprint(int64(8) << 30)}})
	if err != nil {
		return err
	}
	defer p.Stop()
	c, err := p.Client()
	if err != nil {
		return err
	}
	codec, err := keyspace.NewCodec()
	if err != nil {
		return err
	}
	start := time.Now()
	var written atomic.Int64
	// Round r writes generation r of every pod, so that every key's
	// revisions interleave with the others' as on a real cluster.
	for r := range revisions {
		jobs := make(chan int)
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gen := keyspace.NewGenerator(7)
				for i := range jobs {
					ns := fmt.Sprintf("ns-%02d", i%namespaces)
					name := fmt.Sprintf("pod-%05d", i)
					b, err := codec.Encode(gen.Pod(ns, name, r))
					if err == nil {
						key := keyspace.Build(keyspace.Key{Prefix: keyspace.DefaultPrefix, Resource: "pods", Namespace: ns, Name: name})
						_, err = c.Put(ctx, key, string(b))
					}
					if err != nil {
						errs <- err
						return
					}
					written.Add(1)
				}
			}()
		}
		for i := range pods {
			select {
			case jobs <- i:
			case err := <-errs:
				close(jobs)
				wg.Wait()
				return err
			}
		}
		close(jobs)
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
		}
		log.Printf("round %d/%d: %d writes in %v", r+1, revisions, written.Load(), time.Since(start).Round(time.Second))
	}
	c.Close()
	p.Stop()
	if err := os.Rename(p.Members[0].DBPath(), out); err != nil {
		return err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	log.Printf("wrote %s: %d bytes, %d revisions in %v", out, fi.Size(), written.Load(), time.Since(start).Round(time.Second))
	return nil
}
