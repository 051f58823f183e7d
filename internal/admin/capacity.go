package admin

import (
	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/state"
)

// capacityReporter is a coordinator that knows its store's capacity
// (*coordinator.Coordinator does; ok is false for backends that report
// none).
type capacityReporter interface {
	StoreCapacity() (state.Capacity, bool)
}

// storeCapacity returns the store's alarms and capacity for the cluster
// summary, or nothing when the coordinator's backend reports none.
func storeCapacity(c Coordinator) ([]apiv1.StoreAlarm, *apiv1.StoreCapacity) {
	r, ok := c.(capacityReporter)
	if !ok {
		return nil, nil
	}
	cp, ok := r.StoreCapacity()
	if !ok || !cp.Known {
		return nil, nil
	}
	var alarms []apiv1.StoreAlarm
	for _, a := range cp.Alarms {
		alarms = append(alarms, apiv1.StoreAlarm{Alarm: a, Message: state.AlarmMessage(a)})
	}
	return alarms, &apiv1.StoreCapacity{
		DBSizeBytes:     cp.DBSizeBytes,
		DBInUseBytes:    cp.DBInUseBytes,
		QuotaBytes:      cp.QuotaBytes,
		CheckedAtUnixMs: cp.CheckedAt.UnixMilli(),
	}
}
