package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/mst-eval/mst/runner"
)

// Option names of the kubernetes runner (--runner-option NAME=VALUE).
const (
	OptionNamespace      = "namespace"
	OptionImage          = "image"
	OptionMST            = "mst"
	OptionContext        = "context"
	OptionKubeconfig     = "kubeconfig"
	OptionServiceAccount = "serviceAccount"
	OptionWorkDir        = "workDir"
	OptionPodTimeout     = "podTimeout"
	OptionTar            = "tar"
	OptionEnv            = "env"
	// OptionCoordinatorServiceAccount and OptionCoordinatorImage are for
	// detached runs (coordinator.go): the account the coordinator's pod
	// runs as, and the image it runs, which must hold kubectl too.
	OptionCoordinatorServiceAccount = "coordinatorServiceAccount"
	OptionCoordinatorImage          = "coordinatorImage"
	// The placement options (placement.go) apply to the workers' pods and
	// to the coordinator's alike.
	OptionPodSecurity      = "podSecurity"
	OptionRunAsUser        = "runAsUser"
	OptionRequests         = "requests"
	OptionLimits           = "limits"
	OptionNodeSelector     = "nodeSelector"
	OptionTolerations      = "tolerations"
	OptionImagePullSecrets = "imagePullSecrets"
)

// Defaults of the options.
const (
	DefaultMST        = "/mst"
	DefaultWorkDir    = "/work"
	DefaultPodTimeout = 2 * time.Minute
	DefaultTar        = "tar"
)

// Pod labels. Leftovers finds a run's pods by LabelRun.
const (
	LabelRun     = "mst.run"
	LabelShard   = "mst.shard"
	LabelVersion = "mst.version"
	// AnnotationRun holds the run id as it is, in case the label had to
	// change it to fit Kubernetes' rules for label values.
	AnnotationRun = "mst.run"
	// LabelCoordinator labels a detached run's coordinator pod with the
	// detached run's id (made a valid label value), and
	// AnnotationCoordinator holds the id as it is. Leftovers finds
	// coordinator pods by the label.
	LabelCoordinator      = "mst.coordinator"
	AnnotationCoordinator = "mst.coordinator"
)

// ContainerName is the name of the worker's container in each pod.
const ContainerName = "worker"

// MaxShards is the most pods one run creates at once.
const MaxShards = 64

const optionsSchema = `{"type":"object","additionalProperties":false,"required":["namespace"],"properties":{
  "namespace": {"type":"string","description":"Namespace the shards' pods are created in; it must exist."},
  "image": {"type":"string","description":"Worker image the pods run; the cluster's nodes must be able to pull it, and it must hold this MST version.","x-defaultDescription":"mst-worker:<mst version>-debian, the Debian worker image mst runner setup docker --with debian builds (it has tar and env)"},
  "mst": {"type":"string","description":"Path of mst inside the image.","default":"/mst"},
  "context": {"type":"string","description":"kubeconfig context to use.","x-defaultDescription":"kubectl's current context"},
  "kubeconfig": {"type":"string","description":"Path of the kubeconfig file on this machine.","x-defaultDescription":"KUBECONFIG, or ~/.kube/config"},
  "serviceAccount": {"type":"string","description":"Service account the pods run as; without it no API token is mounted in them.","x-defaultDescription":"none mounted"},
  "workDir": {"type":"string","description":"Folder in the pod for the bundle and the transcripts (an emptyDir is mounted there).","default":"/work"},
  "podTimeout": {"type":"string","description":"How long a pod may take to become Ready (a Go duration: 90s, 5m).","default":"2m"},
  "tar": {"type":"string","description":"tar program in the image, which the copies run.","default":"tar"},
  "env": {"type":"string","description":"env program in the image (such as /bin/env); with it a cancelled command is stopped inside the pod, without it only with the pod.","x-defaultDescription":"none"},
  "coordinatorServiceAccount": {"type":"string","description":"Service account a detached run's coordinator pod runs as (--detach needs it); it must be allowed to create, watch, exec into and delete pods in the namespace (docs/kubernetes.md has the Role).","x-defaultDescription":"none: --detach is refused"},
  "coordinatorImage": {"type":"string","description":"Image a detached run's coordinator pod runs: this MST version at the mst path, kubectl on PATH, and tar.","x-defaultDescription":"the image option, when given"},
  "podSecurity": {"type":"string","description":"Pod Security Standards profile the pods meet: restricted (a user other than root, no capabilities, RuntimeDefault seccomp) or baseline (the image's user, for images that must run as root).","default":"restricted"},
  "runAsUser": {"type":"string","description":"Numeric uid, or uid:gid, the pods run as.","x-defaultDescription":"65532:65532 under restricted; the image's user under baseline"},
  "requests": {"type":"string","description":"Resources each pod requests, NAME=QUANTITY separated by commas (cpu, memory, ephemeral-storage), such as cpu=500m,memory=1Gi.","x-defaultDescription":"none"},
  "limits": {"type":"string","description":"Resource limits of each pod, as requests is written, such as cpu=2,memory=4Gi.","x-defaultDescription":"none"},
  "nodeSelector": {"type":"string","description":"Node labels the pods' nodes must have, KEY=VALUE separated by commas, such as kubernetes.io/arch=amd64,pool=evals.","x-defaultDescription":"any node"},
  "tolerations": {"type":"string","description":"Taints the pods tolerate, KEY[=VALUE][:EFFECT] separated by commas as kubectl taint writes them, such as dedicated=evals:NoSchedule.","x-defaultDescription":"none"},
  "imagePullSecrets": {"type":"string","description":"Secrets of the namespace the nodes pull the images with, separated by commas.","x-defaultDescription":"none"}
}}`

// Definition is the kubernetes runner, for the built-in registry.
func Definition() *runner.Definition {
	return &runner.Definition{
		Name:        "kubernetes",
		Description: "Runs each shard in a pod of its own in a Kubernetes namespace, through kubectl (--runner-option namespace=NS).",
		OS:          "linux",
		Options:     json.RawMessage(optionsSchema),
		MaxShards:   MaxShards,
		New:         New,
		Leftovers:   Leftovers,
		Remove:      Remove,
		// With the env option, a cancelled command is stopped inside its
		// pod.
		MachineCommands: []runner.MachineCommand{runner.StopExecCommand(), runner.RelayCommand()},
		Coordinator:     CreateCoordinator,
	}
}

// DefaultImage is the worker image the pods run when the image option is
// not given: the Debian worker image of an MST version, which `mst runner
// setup docker --with debian` builds and tags so (as the docker runner's
// userland images are named). Not the minimal FROM-scratch image the
// docker runner runs by default: the copies in and out of a pod need tar
// in the image, which only the Debian images have.
func DefaultImage(version string) string { return runner.WorkerImage(version) + "-debian" }

// settings are the runner's options, decoded.
type settings struct {
	namespace      string
	image          string
	mst            string
	context        string
	kubeconfig     string
	serviceAccount string
	workDir        string
	podTimeout     time.Duration
	tar            string
	env            string
	// coordinatorServiceAccount and coordinatorImage are the
	// coordinator pod's (coordinator.go).
	coordinatorServiceAccount string
	coordinatorImage          string
	// placement is the pods' security profile, resources and nodes.
	placement placement
}

// dnsLabel is what Kubernetes accepts as a namespace or service account
// name (RFC 1123 label, or subdomain for accounts).
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// parseSettings checks and decodes the options. Its errors name the
// option and say what it takes.
func parseSettings(options map[string]string) (settings, error) {
	s := settings{
		namespace: options[OptionNamespace], image: options[OptionImage],
		mst: DefaultMST, context: options[OptionContext], kubeconfig: options[OptionKubeconfig],
		serviceAccount: options[OptionServiceAccount], workDir: DefaultWorkDir,
		podTimeout: DefaultPodTimeout, tar: DefaultTar, env: options[OptionEnv],
		coordinatorServiceAccount: options[OptionCoordinatorServiceAccount], coordinatorImage: options[OptionCoordinatorImage],
	}
	if s.namespace == "" {
		return s, errors.New("kubernetes runner: no namespace: pass --runner-option namespace=NS (the namespace must exist, and you need to create, exec into and delete pods there)")
	}
	if len(s.namespace) > 63 || !dnsLabel.MatchString(s.namespace) {
		return s, fmt.Errorf("kubernetes runner: --runner-option namespace=%s: a namespace is at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", s.namespace)
	}
	if s.serviceAccount != "" && (len(s.serviceAccount) > 253 || !dnsSubdomain.MatchString(s.serviceAccount)) {
		return s, fmt.Errorf("kubernetes runner: --runner-option serviceAccount=%s is not a valid service account name (lower-case letters, digits, '-' and '.')", s.serviceAccount)
	}
	if a := s.coordinatorServiceAccount; a != "" && (len(a) > 253 || !dnsSubdomain.MatchString(a)) {
		return s, fmt.Errorf("kubernetes runner: --runner-option %s=%s is not a valid service account name (lower-case letters, digits, '-' and '.')", OptionCoordinatorServiceAccount, a)
	}
	if inCluster() {
		// In a detached run's coordinator pod: the kubeconfig and context
		// options name the launching machine's, which are not here; the
		// pod's service account is used instead.
		s.kubeconfig, s.context = "", ""
	}
	if v := options[OptionMST]; v != "" {
		s.mst = v
	}
	if v := options[OptionWorkDir]; v != "" {
		s.workDir = v
	}
	if !path.IsAbs(s.mst) || !path.IsAbs(s.workDir) {
		return s, fmt.Errorf("kubernetes runner: --runner-option mst=%s workDir=%s: both are absolute paths inside the image", s.mst, s.workDir)
	}
	s.workDir = path.Clean(s.workDir)
	if s.workDir == "/" {
		return s, errors.New("kubernetes runner: --runner-option workDir=/: the work folder gets a volume of its own, so it cannot be the root")
	}
	if v := options[OptionTar]; v != "" {
		s.tar = v
	}
	if v := options[OptionPodTimeout]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("kubernetes runner: --runner-option podTimeout=%s: want a positive Go duration such as 90s or 5m", v)
		}
		s.podTimeout = d
	}
	p, err := parsePlacement(options)
	if err != nil {
		return s, err
	}
	s.placement = p
	return s, nil
}

// New makes the kubernetes runner for one run: it checks the options, that
// kubectl can list pods in the namespace, and that it has every one of
// Rights there.
func New(ctx context.Context, p runner.Params) (runner.Runner, error) {
	set, err := parseSettings(p.Options)
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	version := p.MSTVersion
	image := set.image
	if image == "" {
		if version == "" {
			return nil, errors.New("kubernetes runner: no MST version to name the worker image by: pass --runner-option image=REF")
		}
		image = DefaultImage(version)
	}
	k, err := readyKubectl(ctx, set)
	if err != nil {
		return nil, err
	}
	return &kubeRunner{kubectl: k, set: set, image: image, version: version, params: p, logger: logger}, nil
}

// readyKubectl finds kubectl and checks, before any pod, that the user
// has every right the runner uses (Rights) and that the cluster answers.
func readyKubectl(ctx context.Context, set settings) (*kubectl, error) {
	k, err := findKubectl(set)
	if err != nil {
		return nil, err
	}
	if err := k.checkRights(ctx); err != nil {
		return nil, err
	}
	if err := k.reachable(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

type kubeRunner struct {
	kubectl *kubectl
	set     settings
	image   string
	version string
	params  runner.Params
	logger  *slog.Logger
	// noDigest says once that the cluster reported no image digest.
	noDigest sync.Once
}

// RunShard runs one shard in a new pod, named and labelled with the
// shard's run and attempt.
func (r *kubeRunner) RunShard(ctx context.Context, s runner.Shard) (runner.ShardReport, error) {
	spec := podSpec{run: s.Run, attempt: max(s.Attempt, 1), grade: s.Work == "grade", deadline: r.params.MachineDeadline()}
	create := func(ctx context.Context, i int) (runner.Machine, error) {
		spec := spec
		spec.shard = i
		return r.create(ctx, spec)
	}
	return runner.MachineRunner(create, r.params).RunShard(ctx, s)
}

// Close does nothing: pods are deleted as their shards end.
func (r *kubeRunner) Close() error { return nil }
