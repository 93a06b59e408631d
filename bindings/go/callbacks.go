package llm

// Exported Go functions called by bridge.c. A file with //export may only declare in its preamble.

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// callbackState carries a Go callback through C; a panic in it is recovered here (it must not
// unwind through C frames), stops the C call, and is re-raised by the caller after the call.
type callbackState struct {
	onToken    func(token int, piece []byte) bool
	onProgress func(fraction float32) bool
	panicked   interface{}
}

//export llmGoOnToken
func llmGoOnToken(token C.int32_t, piece *C.char, n C.size_t, handle C.uintptr_t) (goOn C.bool) {
	st := cgo.Handle(handle).Value().(*callbackState)
	if st.panicked != nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			st.panicked = r
			goOn = false
		}
	}()
	return C.bool(st.onToken(int(token), C.GoBytes(unsafe.Pointer(piece), C.int(n))))
}

//export llmGoOnProgress
func llmGoOnProgress(fraction C.float, handle C.uintptr_t) (goOn C.bool) {
	st := cgo.Handle(handle).Value().(*callbackState)
	if st.panicked != nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			st.panicked = r
			goOn = false
		}
	}()
	return C.bool(st.onProgress(float32(fraction)))
}
