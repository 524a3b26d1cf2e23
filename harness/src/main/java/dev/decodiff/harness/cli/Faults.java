package dev.decodiff.harness.cli;

import dev.decodiff.engine.Fault;
import picocli.CommandLine;

import java.util.Arrays;
import java.util.Iterator;

/** picocli plumbing for --fault ID: converts ids and lists the catalog in --help. */
final class Faults {
    private Faults() {}

    static final class Converter implements CommandLine.ITypeConverter<Fault> {
        @Override
        public Fault convert(String value) {
            try {
                return Fault.byId(value);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    static final class Candidates implements Iterable<String> {
        @Override
        public Iterator<String> iterator() { return Arrays.stream(Fault.values()).map(Fault::id).iterator(); }
    }
}
