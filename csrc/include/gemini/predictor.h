/* placeholder: the hook's burst predictor API (filled in with the hook) */
