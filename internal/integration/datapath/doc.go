// Package datapath holds the end-to-end tests of reads through the caches
// on real talon processes (package talontest): reads, capacity and
// evictions, a crash while loading, an S3 blob store, the store reads
// read-ahead costs sparse and sequential readers, a broken cache
// directory, a worker joining under load (warm-up) and the traces
// of a read reaching Jaeger. Every test is skipped under -short.
package datapath
