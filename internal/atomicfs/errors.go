package atomicfs

import "errors"

// errExchangeUnsupported says the file system cannot swap two folders in one step.
var errExchangeUnsupported = errors.New("exchange not supported")
