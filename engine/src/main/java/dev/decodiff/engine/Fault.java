package dev.decodiff.engine;

/** The catalog of realistic engine bugs that can be switched on to prove the harness finds them. */
public enum Fault {
    ;
}
