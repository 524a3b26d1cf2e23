package dev.decodiff.harness.compare;

import dev.decodiff.metal.TensorView;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One off-heap buffer, reused tensor after tensor, that a heap tensor (a live engine's float[]) is copied into so the
 * comparison kernels can load it with the Vector API and split it over the cores. It grows to the largest tensor
 * staged and no further, and is freed when the comparison closes it.
 */
final class NativeStaging implements AutoCloseable {
    private Arena arena;
    private MemorySegment buffer;

    /** The tensor itself when the kernels can read it where it is, else a copy in the staging buffer (valid until the next call). */
    TensorView stage(TensorView t) {
        if (CellKernel.loadable(t.data())) return t;
        long bytes = t.data().byteSize();
        if (buffer == null || buffer.byteSize() < bytes) {
            close();
            arena = Arena.ofShared(); // the kernels' worker threads read it
            buffer = arena.allocate(Math.max(bytes, 1), 64);
        }
        var copy = buffer.asSlice(0, bytes).copyFrom(t.data());
        return new TensorView(t.name(), t.dtype(), t.shape(), copy);
    }

    @Override
    public void close() {
        if (arena != null) arena.close();
        arena = null;
        buffer = null;
    }
}
