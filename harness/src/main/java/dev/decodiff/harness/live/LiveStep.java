package dev.decodiff.harness.live;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/** One step of a live engine run: the captured tensors, the greedy choice and its top-2 margin. */
public final class LiveStep implements StepTensors {
    private final int index, start, length;
    private final Map<String, CapturedTensor> tensors;
    private final Map<String, TensorView> views = new LinkedHashMap<>();
    private final int greedy;
    private final double margin;
    private final String origin;

    public LiveStep(int index, int start, int length, Map<String, CapturedTensor> tensors, int greedy, double margin, String origin) {
        this.index = index;
        this.start = start;
        this.length = length;
        this.tensors = tensors;
        this.greedy = greedy;
        this.margin = margin;
        this.origin = origin;
    }

    @Override public int index() { return index; }

    @Override public int start() { return start; }

    @Override public int length() { return length; }

    @Override public Set<String> points() { return tensors.keySet(); }

    public Map<String, CapturedTensor> captured() { return tensors; }

    @Override
    public TensorView tensor(String point) {
        var t = tensors.get(point);
        if (t == null) throw new BadInputException(origin + ": the engine recorded no '" + point + "'");
        return views.computeIfAbsent(point, p -> t.view());
    }

    @Override public String origin() { return origin; }

    @Override public Integer nextToken() { return greedy; }

    @Override public Double top2Margin() { return margin; }

    @Override public void close() { views.clear(); }

    /** Top-1 minus top-2 logit. */
    public static double top2Margin(float[] logits) {
        float a = Float.NEGATIVE_INFINITY, b = Float.NEGATIVE_INFINITY;
        for (float x : logits) {
            if (x > a) { b = a; a = x; }
            else if (x > b) b = x;
        }
        return logits.length < 2 ? Double.NaN : (double) a - b;
    }
}
