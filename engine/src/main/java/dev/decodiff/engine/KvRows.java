package dev.decodiff.engine;

import dev.decodiff.metal.BFloat16;
import dev.decodiff.metal.PackedRows;

import java.util.Arrays;

/**
 * Fixed-size rows of one cache tensor (keys or values) in a {@link KvType} format. Rows are encoded on write
 * and decoded on read; f32 rows are also readable in place through {@link #floats()}.
 */
abstract sealed class KvRows permits KvRows.F32, KvRows.Bf16, KvRows.Q8, KvRows.Q4 {
    final int stride;
    int capacity;

    KvRows(int stride, int capacity) {
        this.stride = stride;
        this.capacity = capacity;
    }

    static KvRows create(KvType type, int stride, int capacity) {
        if (type != KvType.F32 && type != KvType.BF16 && stride % KvType.BLOCK != 0)
            throw new IllegalArgumentException("KV type " + type + " needs rows that are a multiple of " + KvType.BLOCK + " (nkv·d = " + stride + ")");
        return switch (type) {
            case F32 -> new F32(stride, capacity);
            case BF16 -> new Bf16(stride, capacity);
            case Q8_0 -> new Q8(stride, capacity);
            case Q4_0 -> new Q4(stride, capacity);
        };
    }

    abstract KvType type();

    long bytesPerRow() { return type().bytesPerRow(stride); }

    /** The f32 backing array, or null when rows are encoded. */
    float[] floats() { return null; }

    /** The encoded rows as the attention kernels read them in place, or null for f32 rows. */
    PackedRows packed() { return null; }

    abstract void write(int row, float[] src, int off);

    abstract void read(int row, float[] dst, int off);

    abstract void grow(int newCapacity);

    abstract KvRows copy();

    static final class F32 extends KvRows {
        @Override KvType type() { return KvType.F32; }

        float[] data;

        F32(int stride, int capacity) {
            super(stride, capacity);
            data = new float[stride * capacity];
        }

        @Override float[] floats() { return data; }
        @Override void write(int row, float[] src, int off) { System.arraycopy(src, off, data, row * stride, stride); }
        @Override void read(int row, float[] dst, int off) { System.arraycopy(data, row * stride, dst, off, stride); }
        @Override void grow(int n) { data = Arrays.copyOf(data, n * stride); capacity = n; }

        @Override KvRows copy() {
            var c = new F32(stride, 0);
            c.data = data.clone();
            c.capacity = capacity;
            return c;
        }
    }

    static final class Bf16 extends KvRows {
        @Override KvType type() { return KvType.BF16; }

        @Override PackedRows packed() { return new PackedRows(PackedRows.Format.BF16, null, data, stride); }

        short[] data;

        Bf16(int stride, int capacity) {
            super(stride, capacity);
            data = new short[stride * capacity];
        }

        @Override
        void write(int row, float[] src, int off) {
            int b = row * stride;
            for (int i = 0; i < stride; i++) data[b + i] = BFloat16.round(src[off + i]);
        }

        @Override void read(int row, float[] dst, int off) { packed().widen(row * stride, stride, dst, off); }

        @Override void grow(int n) { data = Arrays.copyOf(data, n * stride); capacity = n; }

        @Override KvRows copy() {
            var c = new Bf16(stride, 0);
            c.data = data.clone();
            c.capacity = capacity;
            return c;
        }
    }

    /** llama.cpp q8_0: per block of 32, d = max|x|/127, q = round(x/d). */
    static final class Q8 extends KvRows {
        @Override KvType type() { return KvType.Q8_0; }

        @Override PackedRows packed() { return new PackedRows(PackedRows.Format.Q8_0, q, scale, stride); }

        byte[] q;
        short[] scale;
        final int blocks;

        Q8(int stride, int capacity) {
            super(stride, capacity);
            blocks = stride / KvType.BLOCK;
            q = new byte[stride * capacity];
            scale = new short[blocks * capacity];
        }

        @Override
        void write(int row, float[] src, int off) {
            for (int b = 0; b < blocks; b++) {
                int s = off + b * KvType.BLOCK;
                float amax = 0;
                for (int i = 0; i < KvType.BLOCK; i++) amax = Math.max(amax, Math.abs(src[s + i]));
                float d = amax / 127f;
                float id = d != 0 ? 1f / d : 0f;
                scale[row * blocks + b] = Float.floatToFloat16(d);
                int qb = row * stride + b * KvType.BLOCK;
                for (int i = 0; i < KvType.BLOCK; i++) q[qb + i] = (byte) Math.round(src[s + i] * id);
            }
        }

        @Override void read(int row, float[] dst, int off) { packed().widen(row * stride, stride, dst, off); }

        @Override
        void grow(int n) {
            q = Arrays.copyOf(q, n * stride);
            scale = Arrays.copyOf(scale, n * blocks);
            capacity = n;
        }

        @Override KvRows copy() {
            var c = new Q8(stride, 0);
            c.q = q.clone();
            c.scale = scale.clone();
            c.capacity = capacity;
            return c;
        }
    }

    /** llama.cpp q4_0: per block of 32, d = (signed max-magnitude)/−8, nibble = min(15, (int)(x/d + 8.5)). */
    static final class Q4 extends KvRows {
        @Override KvType type() { return KvType.Q4_0; }

        @Override PackedRows packed() { return new PackedRows(PackedRows.Format.Q4_0, q, scale, stride); }

        byte[] q;
        short[] scale;
        final int blocks;

        Q4(int stride, int capacity) {
            super(stride, capacity);
            blocks = stride / KvType.BLOCK;
            q = new byte[stride / 2 * capacity];
            scale = new short[blocks * capacity];
        }

        @Override
        void write(int row, float[] src, int off) {
            int half = KvType.BLOCK / 2;
            for (int b = 0; b < blocks; b++) {
                int s = off + b * KvType.BLOCK;
                float amax = 0, max = 0;
                for (int i = 0; i < KvType.BLOCK; i++) {
                    float v = src[s + i];
                    if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
                }
                float d = max / -8f;
                float id = d != 0 ? 1f / d : 0f;
                scale[row * blocks + b] = Float.floatToFloat16(d);
                int qb = (row * stride + b * KvType.BLOCK) / 2;
                for (int i = 0; i < half; i++) {
                    int lo = Math.min(15, (int) (src[s + i] * id + 8.5f));
                    int hi = Math.min(15, (int) (src[s + half + i] * id + 8.5f));
                    q[qb + i] = (byte) (lo | (hi << 4));
                }
            }
        }

        @Override void read(int row, float[] dst, int off) { packed().widen(row * stride, stride, dst, off); }

        @Override
        void grow(int n) {
            q = Arrays.copyOf(q, n * stride / 2);
            scale = Arrays.copyOf(scale, n * blocks);
            capacity = n;
        }

        @Override KvRows copy() {
            var c = new Q4(stride, 0);
            c.q = q.clone();
            c.scale = scale.clone();
            c.capacity = capacity;
            return c;
        }
    }
}
