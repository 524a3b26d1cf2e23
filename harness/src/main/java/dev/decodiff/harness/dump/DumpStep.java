package dev.decodiff.harness.dump;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.TensorView;

import java.nio.file.Path;
import java.util.Set;

/** One step of a dump, memory-mapped; the views die with {@link #close()}. */
public final class DumpStep implements StepTensors {
    private final DumpManifest.Step entry;
    private final SafetensorsFile file;

    DumpStep(DumpManifest.Step entry, SafetensorsFile file) {
        this.entry = entry;
        this.file = file;
    }

    public DumpManifest.Step entry() { return entry; }

    @Override
    public int index() { return entry.index(); }

    @Override
    public int start() { return entry.start(); }

    @Override
    public int length() { return entry.length(); }

    @Override
    public String origin() { return file.path().toString(); }

    @Override
    public Integer nextToken() { return entry.nextToken(); }

    @Override
    public Double top2Margin() { return entry.top2Margin(); }

    public Path path() { return file.path(); }

    public Set<String> points() { return file.names(); }

    public boolean has(String point) { return file.has(point); }

    public TensorView tensor(String point) {
        if (!file.has(point)) throw new BadInputException(file.path(), "has no tensor '" + point + "'");
        return file.get(point);
    }

    @Override
    public void close() { file.close(); }
}
