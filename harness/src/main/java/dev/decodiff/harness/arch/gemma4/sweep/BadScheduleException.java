package dev.decodiff.harness.arch.gemma4.sweep;

/** A schedule that cannot run as written (a feed past its stream, a restore of an unknown snapshot): bad input, not an engine finding. */
public final class BadScheduleException extends IllegalArgumentException {
    public BadScheduleException(String message) { super(message); }
}
