"""Operations on a topology's state and code: savepoints, the state half
of a rescale, versioned code packages and the checks on their archives.
"""
