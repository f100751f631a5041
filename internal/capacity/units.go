package capacity

// Bytes covered by one capacity unit.
const (
	// WriteUnitBytes is what one write unit writes: 1 KB.
	WriteUnitBytes = 1024
	// ReadUnitBytes is what one read unit reads strongly consistently: 4 KB.
	ReadUnitBytes = 4096
)

// WriteUnits returns the write units of writing (or deleting, or failing to
// write) an item of size bytes: size / 1 KB rounded up, at least 1.
func WriteUnits(size int) float64 { return float64(ceilUnits(size, WriteUnitBytes)) }

// ReadUnits returns the read units of reading size bytes: size / 4 KB rounded
// up, at least 1; half of that for an eventually consistent read.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(ceilUnits(size, ReadUnitBytes))
	if !consistent {
		return u / 2
	}
	return u
}

// TransactionFactor multiplies the units of every item read or written in a
// transaction.
const TransactionFactor = 2

func ceilUnits(size, unit int) int { return max(1, (size+unit-1)/unit) }
