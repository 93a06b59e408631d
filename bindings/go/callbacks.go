package llm

// Exported Go functions called by bridge.c. A file with //export may only declare in its preamble.

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"io"
	"runtime/cgo"
	"unsafe"
)

// callbackState carries a Go callback through C; a panic in it is recovered here (it must not
// unwind through C frames), stops the C call, and is re-raised by the caller after the call.
type callbackState struct {
	onToken    func(token int, piece []byte) bool
	onProgress func(fraction float32) bool
	onWrite    func(b []byte) error // SaveTo
	readAt     io.ReaderAt          // LoadFrom
	size       int64
	err        error // the host's own I/O error
	panicked   interface{}
}

const (
	statusOK = 0
	statusIO = -2
)

// ioCall runs one host I/O callback for the library: once the host has failed or panicked every
// later call fails at once; a panic is kept for the caller and becomes an I/O status.
func (st *callbackState) ioCall(f func() error) (status C.int32_t) {
	if st.panicked != nil || st.err != nil {
		return statusIO
	}
	defer func() {
		if r := recover(); r != nil {
			st.panicked = r
			status = statusIO
		}
	}()
	if err := f(); err != nil {
		st.err = err
		return statusIO
	}
	return statusOK
}

//export llmGoOnWrite
func llmGoOnWrite(src unsafe.Pointer, n C.uint64_t, handle C.uintptr_t) C.int32_t {
	st := cgo.Handle(handle).Value().(*callbackState)
	return st.ioCall(func() error { return st.onWrite(C.GoBytes(src, C.int(n))) })
}

//export llmGoIoSize
func llmGoIoSize(handle C.uintptr_t) C.uint64_t {
	return C.uint64_t(cgo.Handle(handle).Value().(*callbackState).size)
}

//export llmGoIoReadAt
func llmGoIoReadAt(offset C.uint64_t, dst unsafe.Pointer, n C.uint64_t, handle C.uintptr_t) C.int32_t {
	st := cgo.Handle(handle).Value().(*callbackState)
	return st.ioCall(func() error {
		if n == 0 {
			return nil
		}
		_, err := st.readAt.ReadAt(unsafe.Slice((*byte)(dst), int(n)), int64(offset))
		return err
	})
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
