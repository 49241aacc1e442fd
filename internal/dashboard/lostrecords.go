package dashboard

import (
	"fmt"
	"time"
)

// lostWarning is the warning the Overview, Logs and Usage pages show once
// the gateway has lost call records: the log and usage there miss calls
// that were served. "" on other pages or while nothing was lost.
func (d *Dashboard) lostWarning(tab string) string {
	if d.health == nil || (tab != "overview" && tab != "logs" && tab != "usage") {
		return ""
	}
	h := d.health()
	if h.Dropped == 0 {
		return ""
	}
	records := "call records"
	if h.Dropped == 1 {
		records = "call record"
	}
	return fmt.Sprintf("%d %s could not be written since %s: %s. Those calls were served but are missing from the logs and usage; the gateway's log and /readyz say more.",
		h.Dropped, records, h.Since.UTC().Format(time.DateTime+" UTC"), h.Reason)
}
