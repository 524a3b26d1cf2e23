package dev.decodiff.engine.qwen35;

import dev.decodiff.metal.Parallel;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The gated delta rule of one value head, in fp32, in the two forms transformers 5.17 runs
 * (torch_chunk_gated_delta_rule and torch_recurrent_gated_delta_rule). The state S is dk × dv (row = key dim),
 * decayed by exp(g) and then corrected towards v along k with rate β; the output reads the state after the update.
 * Inputs: q already l2-normed, k l2-normed, each [T][dk] flattened; v [T][dv]; beta and g (the log decay) [T].
 */
final class GatedDeltaRule {
    /** transformers' chunk size for the chunked (prefill) form. */
    static final int CHUNK = 64;

    private GatedDeltaRule() {}

    /**
     * The recurrent form, one token after another: S ← S·exp(g); kv = Sᵀk; δ = (v − kv)·β; S ← S + k⊗δ; o = Sᵀq.
     * q is scaled here by 1/√dk (a division, as transformers' recurrent kernel writes it). {@code decayAfterUpdate}
     * is the catalog fault decode-decay-after-update: the decay multiplies the state after the correction instead.
     */
    static void recurrent(float[] q, float[] k, float[] v, float[] beta, float[] g, int T, int dk, int dv, float[] S, float[] out,
                          boolean decayAfterUpdate) {
        float sqrtDk = (float) Math.sqrt(dk);
        var kv = new float[dv];
        var qs = new float[dk];
        for (int t = 0; t < T; t++) {
            int qo = t * dk, vo = t * dv;
            for (int a = 0; a < dk; a++) qs[a] = q[qo + a] / sqrtDk;
            float decay = (float) Math.exp(g[t]);
            if (!decayAfterUpdate) for (int i = 0; i < dk * dv; i++) S[i] *= decay;
            java.util.Arrays.fill(kv, 0f);
            for (int a = 0; a < dk; a++) {
                float ka = k[qo + a];
                for (int b = 0; b < dv; b++) kv[b] += S[a * dv + b] * ka;
            }
            for (int b = 0; b < dv; b++) kv[b] = (v[vo + b] - kv[b]) * beta[t];
            for (int a = 0; a < dk; a++) {
                float ka = k[qo + a];
                for (int b = 0; b < dv; b++) S[a * dv + b] += ka * kv[b];
            }
            if (decayAfterUpdate) for (int i = 0; i < dk * dv; i++) S[i] *= decay;
            for (int b = 0; b < dv; b++) out[vo + b] = 0f;
            for (int a = 0; a < dk; a++) {
                float qa = qs[a];
                for (int b = 0; b < dv; b++) out[vo + b] += S[a * dv + b] * qa;
            }
        }
    }

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;

    /**
     * One decode token of {@link #recurrent} for every value head at once, in place on the whole state S [hv][dk][dv]
     * (q and k [hv][dk], v and out [hv][dv], beta and g [hv]), the heads shared out over the threads. The same
     * operations on each element in the same order as the one-head form, so the same bits; but two passes over each
     * head's state instead of four, only the second writing (Sᵀk over the decayed state; the decay and the correction
     * with Sᵀq), and no copy of it in or out:
     * decode reads the state of every Gated DeltaNet layer once per token, and at dk = dv = 128 that is 1 MB a layer.
     * Vectors run along dv, where every lane is its own output, with a multiply and an add rounded apart as the scalar
     * loop's {@code acc += a * b} is (never a fused multiply-add).
     */
    static void recurrentStep(float[] q, float[] k, float[] v, float[] beta, float[] g, int hv, int dk, int dv, float[] S, float[] out) {
        float sqrtDk = (float) Math.sqrt(dk);
        Parallel.forRange(hv, 1, (h0, h1) -> {
            var kv = new float[dv];
            var o = new float[dv];
            for (int h = h0; h < h1; h++) head(q, h * dk, k, h * dk, v, h * dv, beta[h], g[h], h * dk * dv, dk, dv, sqrtDk, S, out, h * dv, kv, o);
        });
    }

    /**
     * {@link #recurrentStep} of one value head: its q at q[qo ..], k at k[ko ..], v at v[vo ..], its state at S[base ..],
     * its output to out[oo ..]; kv and o scratch of dv.
     */
    static void head(float[] q, int qo, float[] k, int ko, float[] v, int vo, float beta, float g, int base, int dk, int dv, float sqrtDk, float[] S,
                     float[] out, int oo, float[] kv, float[] o) {
        if (F.length() >= 16) headInColumns(q, qo, k, ko, v, vo, beta, g, base, dk, dv, sqrtDk, S, out, oo, kv);
        else headInRows(q, qo, k, ko, v, vo, beta, g, base, dk, dv, sqrtDk, S, out, oo, kv, o);
    }

    /**
     * {@link #head} a row of the state at a time: each row's products added into kv (and o) in memory. On AVX2 (eight
     * lanes) the faster of the two forms: {@link #headInColumns}'s twelve live vectors crowd its sixteen registers.
     */
    private static void headInRows(float[] q, int qo, float[] k, int ko, float[] v, int vo, float beta, float g, int base, int dk, int dv, float sqrtDk,
                                   float[] S, float[] out, int oo, float[] kv, float[] o) {
        int L = F.length(), bound = dv - dv % L;
        float decay = (float) Math.exp(g);
        java.util.Arrays.fill(kv, 0f);
        java.util.Arrays.fill(o, 0f);
        // kv = Sᵀk over the decayed rows S·exp(g), row by row in key order; read only: the second pass decays each
        // element again (the same product, the same bits) where it writes it, so the state is read twice and written
        // once per token instead of read and written twice
        for (int a = 0; a < dk; a++) {
            float ka = k[ko + a];
            int row = base + a * dv, b = 0;
            for (; b < bound; b += L) {
                var s = FloatVector.fromArray(F, S, row + b).mul(decay);
                FloatVector.fromArray(F, kv, b).add(s.mul(ka)).intoArray(kv, b);
            }
            for (; b < dv; b++) kv[b] += (S[row + b] * decay) * ka;
        }
        for (int b = 0; b < dv; b++) kv[b] = (v[vo + b] - kv[b]) * beta;
        // S ← S·exp(g) + k⊗δ, and o = Sᵀ(q/√dk) over the corrected rows
        for (int a = 0; a < dk; a++) {
            float ka = k[ko + a], qa = q[qo + a] / sqrtDk;
            int row = base + a * dv, b = 0;
            for (; b < bound; b += L) {
                var s = FloatVector.fromArray(F, S, row + b).mul(decay).add(FloatVector.fromArray(F, kv, b).mul(ka));
                s.intoArray(S, row + b);
                FloatVector.fromArray(F, o, b).add(s.mul(qa)).intoArray(o, b);
            }
            for (; b < dv; b++) {
                float s = S[row + b] * decay + ka * kv[b];
                S[row + b] = s;
                o[b] += s * qa;
            }
        }
        System.arraycopy(o, 0, out, oo, dv);
    }

    /**
     * {@link #head} four vectors of columns at a time, down all the rows: each column's sums (kv = Sᵀk over the decayed
     * state, then o = Sᵀq over the corrected one) stay in registers instead of a load and a store per row, the same
     * products added in the same row order. Half the time of {@link #headInRows} with AVX-512 (one thread, 18 layers'
     * states of 1 MB: 59 against 120 µs a layer); the head's 64 KB state is re-read from L2 for its second four columns.
     */
    private static void headInColumns(float[] q, int qo, float[] k, int ko, float[] v, int vo, float beta, float g, int base, int dk, int dv,
                                      float sqrtDk, float[] S, float[] out, int oo, float[] kv) {
        int L = F.length(), wide = dv - dv % (4 * L), bound = dv - dv % L;
        float decay = (float) Math.exp(g);
        int b = 0;
        for (; b < wide; b += 4 * L) {
            var a0 = FloatVector.zero(F);
            var a1 = a0;
            var a2 = a0;
            var a3 = a0;
            for (int a = 0, row = base + b; a < dk; a++, row += dv) {
                float ka = k[ko + a];
                a0 = a0.add(FloatVector.fromArray(F, S, row).mul(decay).mul(ka));
                a1 = a1.add(FloatVector.fromArray(F, S, row + L).mul(decay).mul(ka));
                a2 = a2.add(FloatVector.fromArray(F, S, row + 2 * L).mul(decay).mul(ka));
                a3 = a3.add(FloatVector.fromArray(F, S, row + 3 * L).mul(decay).mul(ka));
            }
            a0.intoArray(kv, b);
            a1.intoArray(kv, b + L);
            a2.intoArray(kv, b + 2 * L);
            a3.intoArray(kv, b + 3 * L);
        }
        for (; b < bound; b += L) {
            var a0 = FloatVector.zero(F);
            for (int a = 0, row = base + b; a < dk; a++, row += dv) a0 = a0.add(FloatVector.fromArray(F, S, row).mul(decay).mul(k[ko + a]));
            a0.intoArray(kv, b);
        }
        for (; b < dv; b++) {
            float s = 0f;
            for (int a = 0, row = base + b; a < dk; a++, row += dv) s += (S[row] * decay) * k[ko + a];
            kv[b] = s;
        }
        for (b = 0; b < dv; b++) kv[b] = (v[vo + b] - kv[b]) * beta;
        for (b = 0; b < wide; b += 4 * L) {
            var d0 = FloatVector.fromArray(F, kv, b);
            var d1 = FloatVector.fromArray(F, kv, b + L);
            var d2 = FloatVector.fromArray(F, kv, b + 2 * L);
            var d3 = FloatVector.fromArray(F, kv, b + 3 * L);
            var o0 = FloatVector.zero(F);
            var o1 = o0;
            var o2 = o0;
            var o3 = o0;
            for (int a = 0, row = base + b; a < dk; a++, row += dv) {
                float ka = k[ko + a], qa = q[qo + a] / sqrtDk;
                var s0 = FloatVector.fromArray(F, S, row).mul(decay).add(d0.mul(ka));
                var s1 = FloatVector.fromArray(F, S, row + L).mul(decay).add(d1.mul(ka));
                var s2 = FloatVector.fromArray(F, S, row + 2 * L).mul(decay).add(d2.mul(ka));
                var s3 = FloatVector.fromArray(F, S, row + 3 * L).mul(decay).add(d3.mul(ka));
                s0.intoArray(S, row);
                s1.intoArray(S, row + L);
                s2.intoArray(S, row + 2 * L);
                s3.intoArray(S, row + 3 * L);
                o0 = o0.add(s0.mul(qa));
                o1 = o1.add(s1.mul(qa));
                o2 = o2.add(s2.mul(qa));
                o3 = o3.add(s3.mul(qa));
            }
            o0.intoArray(out, oo + b);
            o1.intoArray(out, oo + b + L);
            o2.intoArray(out, oo + b + 2 * L);
            o3.intoArray(out, oo + b + 3 * L);
        }
        for (; b < bound; b += L) {
            var d0 = FloatVector.fromArray(F, kv, b);
            var o0 = FloatVector.zero(F);
            for (int a = 0, row = base + b; a < dk; a++, row += dv) {
                var s0 = FloatVector.fromArray(F, S, row).mul(decay).add(d0.mul(k[ko + a]));
                s0.intoArray(S, row);
                o0 = o0.add(s0.mul(q[qo + a] / sqrtDk));
            }
            o0.intoArray(out, oo + b);
        }
        for (; b < dv; b++) {
            float o = 0f;
            for (int a = 0, row = base + b; a < dk; a++, row += dv) {
                float s = S[row] * decay + k[ko + a] * kv[b];
                S[row] = s;
                o += s * (q[qo + a] / sqrtDk);
            }
            out[oo + b] = o;
        }
    }

    /**
     * The chunked form over 64-token chunks (the WY / UT-transform algebra of torch_chunk_gated_delta_rule): inside
     * a chunk with cumulative log decay G, A = (βK·Kᵀ)⊙exp(G_i − G_j) strictly below the diagonal, U = (I+A)⁻¹ βV and
     * W = (I+A)⁻¹ (βK⊙exp G) by forward substitution; then per chunk V' = U − W·S, O = (Q⊙exp G)·S + ((Q·Kᵀ)⊙D)·V',
     * S ← exp(G_last)·S + (K⊙exp(G_last − G))ᵀ·V'. A last, partial chunk is computed without padding: padded
     * positions (β = 0, g = 0, k = 0) would add exact zeros. q is scaled here by dk^-½ (a product, as the chunked
     * kernel writes it).
     */
    static void chunked(float[] q, float[] k, float[] v, float[] beta, float[] g, int T, int dk, int dv, float[] S, float[] out) {
        float scale = (float) Math.pow(dk, -0.5);
        int C = CHUNK;
        var G = new float[C];
        var kb = new float[C * dk];
        var U = new float[C * dv];
        var W = new float[C * dk];
        var A = new float[C * C];
        var intra = new float[C * C];
        var qd = new float[C * dk];
        var kdT = new float[dk * C];
        var kT = new float[dk * C];
        var vNew = new float[C * dv];
        var qs = new float[C * dk];
        var prod = new float[Math.max(C * Math.max(dv, C), dk * dv)];
        var prod2 = new float[C * Math.max(dv, C)];
        for (int c0 = 0; c0 < T; c0 += C) {
            int n = Math.min(C, T - c0);
            float acc = 0f;
            for (int i = 0; i < n; i++) {
                acc += g[c0 + i];
                G[i] = acc;
            }
            for (int i = 0; i < n; i++) {
                int t = c0 + i;
                for (int a = 0; a < dk; a++) {
                    qs[i * dk + a] = q[t * dk + a] * scale;
                    kb[i * dk + a] = k[t * dk + a] * beta[t];
                    kT[a * C + i] = k[t * dk + a];
                }
                for (int b = 0; b < dv; b++) U[i * dv + b] = v[t * dv + b] * beta[t];
                float eg = (float) Math.exp(G[i]);
                for (int a = 0; a < dk; a++) W[i * dk + a] = kb[i * dk + a] * eg;
            }
            // A (strictly lower part used) and the intra-chunk attention (lower part with the diagonal): the dot products
            // over dk for every j < n at once (those above the diagonal are not used), then the decay of each pair
            rowsTimes(kb, dk, n, dk, kT, C, n, prod, C);
            rowsTimes(qs, dk, n, dk, kT, C, n, prod2, C);
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= i; j++) {
                    float d = (float) Math.exp(G[i] - G[j]);
                    A[i * C + j] = prod[i * C + j] * d;
                    intra[i * C + j] = prod2[i * C + j] * d;
                }
            // forward substitution with a unit diagonal: row i takes A[i][j]·row j for j < i in order, as LAPACK's
            // column-by-column trsm applies them to it
            for (int i = 1; i < n; i++) {
                subtractRows(A, i * C, i, U, dv);
                subtractRows(A, i * C, i, W, dk);
            }
            float gl = G[n - 1];
            for (int i = 0; i < n; i++) {
                float eg = (float) Math.exp(G[i]);
                float el = (float) Math.exp(gl - G[i]);
                int t = c0 + i;
                for (int a = 0; a < dk; a++) {
                    qd[i * dk + a] = qs[i * dk + a] * eg;
                    kdT[a * C + i] = k[t * dk + a] * el;
                }
            }
            // V' = U − W·S
            rowsTimes(W, dk, n, dk, S, dv, dv, prod, dv);
            for (int e = 0; e < n * dv; e++) vNew[e] = U[e] - prod[e];
            // O = (Q⊙exp G)·S + intra·V' (row i over j ≤ i)
            rowsTimes(qd, dk, n, dk, S, dv, dv, prod, dv);
            for (int i = 0; i < n; i++) rowTimes(intra, i * C, i + 1, vNew, dv, dv, prod2, i * dv, false);
            for (int i = 0; i < n; i++) {
                int t = c0 + i;
                for (int b = 0; b < dv; b++) out[t * dv + b] = prod[i * dv + b] + prod2[i * dv + b];
            }
            // S ← exp(G_last)·S + (K⊙exp(G_last − G))ᵀ·V'
            float ed = (float) Math.exp(gl);
            rowsTimes(kdT, C, dk, n, vNew, dv, dv, prod, dv);
            for (int e = 0; e < dk * dv; e++) S[e] = S[e] * ed + prod[e];
        }
    }

    /** {@link #rowTimes} for rows r < rows of w (w[r·ldw ..]) into out[r·ldo ..]. */
    private static void rowsTimes(float[] w, int ldw, int rows, int n, float[] M, int ldm, int width, float[] out, int ldo) {
        for (int r = 0; r < rows; r++) rowTimes(w, r * ldw, n, M, ldm, width, out, r * ldo, false);
    }

    /** Row i of X (width columns) minus A[ao + j]·row j for j < i, in j's order, each product rounded before it is subtracted. */
    private static void subtractRows(float[] A, int ao, int i, float[] X, int width) { rowTimes(A, ao, i, X, width, width, X, i * width, true); }

    /**
     * out[oo + b] = Σ_{a<n} w[wo + a]·M[a·ldm + b] for b < width, each sum over a in order from 0 with every product
     * rounded before it is added: the bits of the plain loop that adds each row's products into a row of sums in memory,
     * with the sums held in registers, four vectors of columns at a time. {@code subtract}: out[oo + b] minus the same
     * products in the same order instead (s − p is s + (−p), and (−w)·m is −(w·m), exactly).
     */
    private static void rowTimes(float[] w, int wo, int n, float[] M, int ldm, int width, float[] out, int oo, boolean subtract) {
        int L = F.length(), b = 0;
        float sign = subtract ? -1f : 1f;
        for (int wide = width - width % (4 * L); b < wide; b += 4 * L) {
            var s0 = subtract ? FloatVector.fromArray(F, out, oo + b) : FloatVector.zero(F);
            var s1 = subtract ? FloatVector.fromArray(F, out, oo + b + L) : s0;
            var s2 = subtract ? FloatVector.fromArray(F, out, oo + b + 2 * L) : s0;
            var s3 = subtract ? FloatVector.fromArray(F, out, oo + b + 3 * L) : s0;
            for (int a = 0, m = b; a < n; a++, m += ldm) {
                float x = sign * w[wo + a];
                s0 = s0.add(FloatVector.fromArray(F, M, m).mul(x));
                s1 = s1.add(FloatVector.fromArray(F, M, m + L).mul(x));
                s2 = s2.add(FloatVector.fromArray(F, M, m + 2 * L).mul(x));
                s3 = s3.add(FloatVector.fromArray(F, M, m + 3 * L).mul(x));
            }
            s0.intoArray(out, oo + b);
            s1.intoArray(out, oo + b + L);
            s2.intoArray(out, oo + b + 2 * L);
            s3.intoArray(out, oo + b + 3 * L);
        }
        for (int bound = width - width % L; b < bound; b += L) {
            var s0 = subtract ? FloatVector.fromArray(F, out, oo + b) : FloatVector.zero(F);
            for (int a = 0, m = b; a < n; a++, m += ldm) s0 = s0.add(FloatVector.fromArray(F, M, m).mul(sign * w[wo + a]));
            s0.intoArray(out, oo + b);
        }
        for (; b < width; b++) {
            float s0 = subtract ? out[oo + b] : 0f;
            for (int a = 0, m = b; a < n; a++, m += ldm) s0 += sign * w[wo + a] * M[m];
            out[oo + b] = s0;
        }
    }
}
