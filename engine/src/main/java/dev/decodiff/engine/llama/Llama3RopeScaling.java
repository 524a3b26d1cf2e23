package dev.decodiff.engine.llama;

/**
 * Llama 3.x's rope_type "llama3": the default inverse frequencies with long wavelengths stretched by {@code factor},
 * short ones kept, and those between blended smoothly. Each step is the fp32 tensor operation transformers 5.17's
 * _compute_llama3_parameters performs, in its order (Python scalars rounded to float as torch does), so the table
 * is transformers' own to the last bit wherever torch's pow agrees with the default table's.
 */
record Llama3RopeScaling(double factor, double lowFreqFactor, double highFreqFactor, int originalMaxPositions) {

    float[] apply(float[] inv) {
        float f = (float) factor, low = (float) lowFreqFactor, high = (float) highFreqFactor, old = originalMaxPositions;
        float lowWavelen = (float) (originalMaxPositions / lowFreqFactor);
        float highWavelen = (float) (originalMaxPositions / highFreqFactor);
        float twoPi = (float) (2 * Math.PI);
        float span = (float) (highFreqFactor - lowFreqFactor);
        var out = new float[inv.length];
        for (int j = 0; j < inv.length; j++) {
            // torch's scalar / tensor is reciprocal(tensor) * scalar
            float wavelen = (1f / inv[j]) * twoPi;
            float scaled = wavelen > lowWavelen ? inv[j] / f : inv[j];
            boolean medium = !(wavelen < highWavelen) && !(wavelen > lowWavelen);
            if (!medium) {
                out[j] = scaled;
                continue;
            }
            float smooth = ((1f / wavelen) * old - low) / span;
            out[j] = (1f - smooth) * scaled / f + smooth * scaled;
        }
        return out;
    }
}
