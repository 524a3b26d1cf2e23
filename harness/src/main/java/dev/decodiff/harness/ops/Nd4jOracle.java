package dev.decodiff.harness.ops;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.impl.transforms.custom.SoftMax;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.ops.transforms.Transforms;

import java.io.IOException;
import java.util.Properties;

/**
 * {@link Oracle} on ND4J's CPU backend (libnd4j + OpenBLAS), in float64 except where transformers itself rounds to
 * fp32 (the RoPE table and angle). The only class of decodiff that refers to ND4J; built by {@link OracleLoader}.
 * Its ops are ND4J's own where ND4J has a fitting one (gemm, softmax, pow, cos, sin, tanh); RMSNorm, RoPE and
 * gelu-tanh, which ND4J 1.0.0-M2.1 lacks, are composed from its element-wise and reduction ops.
 */
public final class Nd4jOracle implements Oracle {
    private static final DataType F64 = DataType.DOUBLE, F32 = DataType.FLOAT;

    private final double initSeconds;
    private final String describe;

    public Nd4jOracle() {
        long t0 = System.nanoTime();
        Nd4j.create(F64, 1).addi(1); // loads the backend and its native library, runs one op
        initSeconds = (System.nanoTime() - t0) / 1e9;
        String blas;
        try {
            blas = Nd4j.factory().blas().getBlasVendor().toString();
        } catch (RuntimeException e) {
            blas = "unknown BLAS";
        }
        describe = "ND4J " + version() + " (" + Nd4j.getBackend().getClass().getSimpleName() + ", " + blas + ", float64)";
    }

    static String version() {
        var p = new Properties();
        try (var in = Nd4jOracle.class.getResourceAsStream("nd4j.properties")) {
            if (in != null) p.load(in);
        } catch (IOException ignored) {
            // falls back to "?"
        }
        return p.getProperty("version", "?");
    }

    @Override public String describe() { return describe; }

    @Override public double initSeconds() { return initSeconds; }

    private static INDArray f32(float[] x, long... shape) { return Nd4j.createFromArray(x).reshape('c', shape); }

    private static INDArray f64(float[] x, long... shape) { return f32(x, shape).castTo(F64); }

    private static double[] out(INDArray a) { return a.dup('c').data().asDouble(); }

    @Override
    public float[] roundTo(String dtype, float[] x) {
        DataType t = switch (dtype) {
            case "bf16" -> DataType.BFLOAT16;
            case "f16" -> DataType.HALF;
            default -> throw new IllegalArgumentException(dtype);
        };
        return f32(x, x.length).castTo(t).castTo(F32).dup('c').data().asFloat();
    }

    @Override
    public double[] linear(float[] w, int rows, int cols, float[] x, int tokens) {
        return out(f64(x, tokens, cols).mmul(f64(w, rows, cols).transpose()));
    }

    @Override
    public double[] rmsNorm(float[] x, int rows, int n, float[] w, double eps) {
        INDArray a = f64(x, rows, n);
        INDArray inv = Transforms.pow(a.mul(a).mean(1).add(eps), -0.5, false).reshape(rows, 1);
        INDArray y = a.mulColumnVector(inv);
        if (w != null) y = y.mulRowVector(f64(w, 1, n));
        return out(y);
    }

    @Override
    public double[] rope(float[] x, int tokens, int heads, int d, int[] pos, String type, double theta, double partial, double factor) {
        int half = d / 2;
        int nRot = switch (type) {
            case "default" -> half;
            case "proportional" -> (int) Math.floor(partial * d / 2.0);
            default -> throw new IllegalArgumentException(type);
        };
        // fp32, as transformers: inv_freq = 1 / θ^(arange(0, 2·nRot, 2).float() / d), then the angle float(p)·inv_freq.
        INDArray e = Nd4j.arange(0, 2L * nRot, 2).castTo(F32).div((float) d);
        INDArray inv = Transforms.pow(Nd4j.valueArrayOf(e.shape(), (float) theta, F32), e, false).rdiv(1.0f);
        if (type.equals("proportional") && factor != 1.0) inv = inv.div((float) factor);
        INDArray invFull = Nd4j.zeros(F32, 1, half);
        invFull.get(NDArrayIndex.point(0), NDArrayIndex.interval(0, nRot)).assign(inv);
        var p = new float[tokens];
        for (int t = 0; t < tokens; t++) p[t] = pos[t];
        INDArray angle = f32(p, tokens, 1).broadcast(tokens, half).mul(invFull.broadcast(tokens, half)).castTo(F64);
        INDArray cos = Transforms.cos(angle, true).reshape(tokens, 1, half).broadcast(tokens, heads, half);
        INDArray sin = Transforms.sin(angle, true).reshape(tokens, 1, half).broadcast(tokens, heads, half);
        INDArray a = f64(x, tokens, heads, d);
        INDArray x1 = a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, half));
        INDArray x2 = a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(half, d));
        INDArray y1 = x1.mul(cos).sub(x2.mul(sin));
        INDArray y2 = x2.mul(cos).add(x1.mul(sin));
        return out(Nd4j.concat(2, y1, y2));
    }

    @Override
    public double[] softmax(float[] x, int rows, int n) {
        return out(softmaxRows(f64(x, rows, n)));
    }

    private static INDArray softmaxRows(INDArray a) {
        INDArray z = a.ulike();
        Nd4j.exec(new SoftMax(a, z, 1));
        return z;
    }

    @Override
    public double[] attention(float[] q, int nh, float[] k, float[] v, int ctx, int nkv, int d, double scale) {
        INDArray Q = f64(q, nh, d), K = f64(k, ctx, nkv, d), V = f64(v, ctx, nkv, d);
        int group = nh / nkv;
        var heads = new INDArray[nh];
        for (int h = 0; h < nh; h++) {
            int g = h / group;
            INDArray kg = K.get(NDArrayIndex.all(), NDArrayIndex.point(g), NDArrayIndex.all());   // [ctx, d]
            INDArray vg = V.get(NDArrayIndex.all(), NDArrayIndex.point(g), NDArrayIndex.all());
            INDArray scores = Q.getRow(h).reshape(1, d).mmul(kg.transpose()).mul(scale);       // [1, ctx]
            heads[h] = softmaxRows(scores).mmul(vg);                                              // [1, d]
        }
        return out(Nd4j.concat(0, heads));
    }

    /**
     * Composed from ND4J's pow/tanh in float64. ND4J's own GELU ops do not fit: {@code GELU} is the sigmoid form
     * x·σ(1.702x) (and computed at float precision), and 1.0.0-M2.1's {@code PreciseGELU} matches neither the tanh
     * nor the erf form (−0.0247 at x = −3, where both give −0.004).
     */
    @Override
    public double[] geluTanh(float[] x) {
        INDArray a = f64(x, x.length);
        INDArray inner = a.add(Transforms.pow(a, 3, true).mul(0.044715)).mul(Math.sqrt(2.0 / Math.PI));
        return out(a.mul(0.5).mul(Transforms.tanh(inner, false).add(1.0)));
    }
}
