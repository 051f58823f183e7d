// Package simulate implements `talonctl placement simulate`: what a drain
// or new workers would do to placement, computed with internal/placement,
// the HRW code the coordinators run.
//
// Invariants:
//
//   - Exact for the sample. The membership is the eligible workers of the
//     node list (placement.Eligible over records rebuilt from the API's
//     nodes: the fields eligibility reads are all in the API), the owners
//     are placement.Table.Lookup of the same keys, so a coordinator that
//     reads the same membership answers the same owners for them.
//   - Deterministic. The sample keys are SampleKey(0..samples-1); no
//     randomness, clock or map order reaches a result.
//   - Pure model. Simulate (model.go) does no I/O; the command reads the
//     node list (live or from a file) and prints.
package simulate
