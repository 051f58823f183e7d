package harness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Write prints the report as text (the ceilings, a row per fleet size,
// then each row's failures by code) or JSON.
func (r FleetReport) Write(w io.Writer, output string) error {
	if output == "json" {
		return writeIndentedJSON(w, r)
	}
	fmt.Fprintf(w, "fleet heartbeats on %s: %d coordinator processes, workers in fleet processes of their own heartbeating every %s (open loop), %s per row, %d lookups/s beside, %d-byte records\n",
		r.Backend, r.Coordinators, secs(r.IntervalSeconds), secs(r.RowSeconds), r.LookupRate, r.RecordBytes)
	for _, c := range r.Ceilings {
		fmt.Fprintf(w, "raw ceiling %s: %d writers back to back%s: %.0f/s p99 %.2fms, CPU s per 1,000 ops: client %.3f%s\n",
			c.Mix, c.Writers, sharedStreams(c.Streams, c.Mix), c.Raw.PerSecond, c.Raw.P99Ms, c.ClientCPUPer1000, optCPU(", store", c.StoreCPUPer1000))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "workers\texpected/s\taccepted/s\tof ceiling\tfailed\tmissed\tcoord CPU s/1k\t(idle cores)\tfleet CPU s/1k\tstore CPU s/1k\t(idle cores)\tcoord RSS/worker\thb p99\tlookup p99\tregistered in\t\n")
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\t\n", row.Workers, "not measured (below)")
			continue
		}
		store, storeIdle := "-", "-"
		if row.StoreCPUPer1000 != nil && row.StoreBaselineCores != nil {
			store, storeIdle = fmt.Sprintf("%.3f", *row.StoreCPUPer1000), fmt.Sprintf("%.3f", *row.StoreBaselineCores)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.1f\t%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%s\t%s\t%.1f KiB\t%.2fms\t%.2fms\t%.1fs\t\n", row.Workers, row.ExpectedPerSecond, row.AcceptedPerSecond,
			ofCeiling(row.OfCeiling), failed(row), row.Missed, row.CoordinatorCPUPer1000, row.CoordinatorBaselineCores, row.FleetCPUPer1000, store, storeIdle, row.RSSPerWorkerKiB,
			row.Heartbeats.P99Ms, row.Lookups.P99Ms, row.RegisterSeconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(w, "not measured (%d workers): %s\n", row.Workers, row.Error)
		}
		if row.Cleanup != "" {
			fmt.Fprintf(w, "left behind (%d workers): %s\n", row.Workers, row.Cleanup)
		}
		for _, code := range slices.Sorted(maps.Keys(row.Heartbeats.Failures)) {
			fmt.Fprintf(w, "failures (%d workers): %s %d\n", row.Workers, code, row.Heartbeats.Failures[code])
		}
		if n := len(row.Lookups.Failures); n > 0 {
			fmt.Fprintf(w, "lookup failures (%d workers): %v\n", row.Workers, row.Lookups.Failures)
		}
		if row.KubeQPS > 0 {
			fmt.Fprintf(w, "coordinators' kube-qps (%d workers): %d\n", row.Workers, row.KubeQPS)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// failed is the row's failed heartbeats, whatever their code.
func failed(row FleetRow) int {
	n := row.Heartbeats.BackedOff
	for _, v := range row.Heartbeats.Failures {
		n += v
	}
	return n
}

// ofCeiling renders the row's ratios to the ceilings.
func ofCeiling(rs []float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.3f", r))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "/")
}

func optCPU(label string, v *float64) string {
	if v == nil {
		return ""
	}
	return fmt.Sprintf("%s %.3f", label, *v)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
