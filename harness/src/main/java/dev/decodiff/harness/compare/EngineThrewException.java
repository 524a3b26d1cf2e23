package dev.decodiff.harness.compare;

/**
 * Thrown by a {@link CandidateSource} whose engine threw while computing a step. The comparison catches it and
 * ends with the result so far and the failure as a finding; anything else a source throws stays an error.
 */
public final class EngineThrewException extends RuntimeException {
    private final EngineFailure failure;

    public EngineThrewException(int step, Throwable cause) {
        super(EngineFailure.of(step, cause).sentence(), cause);
        this.failure = EngineFailure.of(step, cause);
    }

    public EngineFailure failure() { return failure; }
}
