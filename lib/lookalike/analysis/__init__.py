"""The computations behind the stages: hard negatives, the leak ablation and its gate, question
validation, calibration, mining and the metric tables' scoring."""
